//! An operation's input or result buffer: its bytes, or, for a [`Chunked`] operation, what can
//! be made again from the seed. A world of n ranks in an allgather or all-to-all holds n
//! buffers of n chunks each (1.9 GB at 4096 ranks); a chunked buffer holds only the chunks that
//! differ from the ones predicted (none in a healthy run) and a bit per chunk written, yet
//! reads, and gives back at completion, exactly the bytes a plain buffer would.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

/// Where a chunk's bytes go as a [`MakeChunk`] puts them, piece by piece: appended to a
/// vector, or compared with bytes that came, so one generator both makes a chunk and checks one
/// without making it.
pub trait ChunkSink {
    /// Takes the chunk's next bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl ChunkSink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A [`ChunkSink`] that compares what is put with the bytes it was given, keeping nothing.
struct SameAs<'a> {
    rest: &'a [u8],
    same: bool,
}

impl SameAs<'_> {
    /// True if what was put is exactly the bytes given.
    fn same(&self) -> bool {
        self.same && self.rest.is_empty()
    }
}

impl ChunkSink for SameAs<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        match self.rest.strip_prefix(bytes) {
            Some(rest) if self.same => self.rest = rest,
            _ => self.same = false,
        }
    }
}

/// Chunk `p` of a buffer, a pure function of `p` (made from the seed), put piece by piece into
/// any [`ChunkSink`]: written once, it both makes chunks and checks them ([`Chunks::new`]).
pub trait MakeChunk: Send + Sync + 'static {
    /// Puts chunk `p`'s bytes, in order, into `out`.
    fn put_chunk<S: ChunkSink>(&self, p: u32, out: &mut S);

    /// Chunks `ps`, one after another, borrowed, if they are kept made (as an allgather's slices
    /// shared by a world's ranks are); `None`, the default, if not.
    fn kept(&self, ps: Range<u32>) -> Option<&[u8]> {
        let _ = ps;
        None
    }
}

/// A closure as a [`MakeChunk`] ([`Chunks::from_fn`]), its sink behind `dyn`.
struct FromFn<F>(F);

impl<F: Fn(u32, &mut dyn ChunkSink) + Send + Sync + 'static> MakeChunk for FromFn<F> {
    fn put_chunk<S: ChunkSink>(&self, p: u32, out: &mut S) {
        (self.0)(p, out)
    }
}

/// [`Chunks`]' two uses of one [`MakeChunk`], each with its sink known.
trait Chunker: Send + Sync {
    fn make(&self, p: u32, out: &mut Vec<u8>);
    fn is(&self, p: u32, bytes: &[u8]) -> bool;
    fn kept(&self, ps: Range<u32>) -> Option<&[u8]>;
}

impl<G: MakeChunk> Chunker for G {
    fn make(&self, p: u32, out: &mut Vec<u8>) {
        self.put_chunk(p, out);
    }

    fn is(&self, p: u32, bytes: &[u8]) -> bool {
        let mut same = SameAs { rest: bytes, same: true };
        self.put_chunk(p, &mut same);
        same.same()
    }

    fn kept(&self, ps: Range<u32>) -> Option<&[u8]> {
        MakeChunk::kept(self, ps)
    }
}

/// Makes chunk `p` of a buffer from the seed (a pure function of `p`), or tells whether bytes
/// are that chunk without making it; cheap to clone (shared).
#[derive(Clone)]
pub struct Chunks(Arc<dyn Chunker>);

impl Chunks {
    /// The chunks `make` puts.
    pub fn new(make: impl MakeChunk) -> Chunks {
        Chunks(Arc::new(make))
    }

    /// The chunks a closure puts into the sink it is given.
    pub fn from_fn(make: impl Fn(u32, &mut dyn ChunkSink) + Send + Sync + 'static) -> Chunks {
        Chunks::new(FromFn(make))
    }

    /// Appends chunk `p` to `out` (so a buffer made whole, or chunk by chunk, allocates once).
    pub fn make(&self, p: u32, out: &mut Vec<u8>) {
        self.0.make(p, out);
    }

    /// True if `bytes` are exactly chunk `p`, compared as it is made, piece by piece.
    pub fn is(&self, p: u32, bytes: &[u8]) -> bool {
        self.0.is(p, bytes)
    }

    /// Chunks `ps`, one after another, borrowed, if they are kept made ([`MakeChunk::kept`]).
    pub fn kept(&self, ps: Range<u32>) -> Option<&[u8]> {
        self.0.kept(ps)
    }
}

/// An allgather or all-to-all whose bytes are pure functions of the peer: the rank makes each
/// input chunk when it sends it and keeps of its result only the chunks that differ from
/// `expected`, and completes with the same bytes the plain [`super::Op`] would give.
#[derive(Clone)]
pub enum Chunked {
    /// [`super::Op::Allgather`] of `expected(rank)`, `len` bytes; slice p should be `expected(p)`.
    Allgather {
        /// Each rank's contribution, in bytes.
        len: usize,
        /// Rank p's contribution, made on demand.
        expected: Chunks,
    },
    /// [`super::Op::Alltoall`] of chunks `input(0..n)`, `len` bytes each; chunk p of the result
    /// should be `expected(p)`.
    Alltoall {
        /// Each chunk's size, in bytes.
        len: usize,
        /// This rank's chunk for peer p, made when it is sent.
        input: Chunks,
        /// The chunk peer p should send this rank.
        expected: Chunks,
    },
}

impl fmt::Debug for Chunked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chunked::Allgather { len, .. } => write!(f, "Allgather {{ len: {len} }} (chunked)"),
            Chunked::Alltoall { len, .. } => write!(f, "Alltoall {{ len: {len} }} (chunked)"),
        }
    }
}

/// An operation's buffer.
#[derive(Clone)]
pub(crate) enum Buffer {
    /// The bytes themselves.
    Bytes(Vec<u8>),
    /// `len` zero bytes, not allocated until written (init's table before a rank knows the
    /// addresses to predict: every rank holds one from the start, n² bytes in the world).
    Zeroed(usize),
    /// `n` chunks of `len` bytes, each zero until written; a written one is `predict(p)`
    /// unless `differ` holds its bytes. `last` keeps the last chunk written as predicted, made
    /// once (a ring forwards the chunk it received last).
    Predicted {
        len: usize,
        n: u32,
        predict: Chunks,
        written: Vec<u64>,
        differ: BTreeMap<u32, Vec<u8>>,
        last: Option<(u32, Vec<u8>)>,
    },
}

impl Buffer {
    /// `n` zeroed chunks of `len` bytes, predicted to become `predict(p)`.
    pub(crate) fn predicted(len: usize, n: u32, predict: Chunks) -> Buffer {
        let written = vec![0; (n as usize).div_ceil(64)];
        Buffer::Predicted { len, n, predict, written, differ: BTreeMap::new(), last: None }
    }

    /// `n` chunks of `len` bytes, chunk p being `make(p)` (made when read).
    pub(crate) fn made(len: usize, n: u32, make: Chunks) -> Buffer {
        let mut b = Buffer::predicted(len, n, make);
        if let Buffer::Predicted { written, .. } = &mut b {
            written.iter_mut().for_each(|w| *w = !0);
        }
        b
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Buffer::Bytes(b) => b.len(),
            Buffer::Zeroed(len) => *len,
            Buffer::Predicted { len, n, .. } => len * *n as usize,
        }
    }

    /// Chunk `p` as it stands.
    fn chunk(&self, p: u32) -> Cow<'_, [u8]> {
        match self {
            Buffer::Bytes(_) | Buffer::Zeroed(_) => unreachable!("only a predicted buffer is read by chunk"),
            // The last chunk written is never also one that differs: look there first (a ring
            // forwards what it just received).
            Buffer::Predicted { last: Some((q, bytes)), .. } if *q == p => Cow::Borrowed(bytes),
            Buffer::Predicted { len, predict, written, differ, .. } => match differ.get(&p) {
                Some(bytes) => Cow::Borrowed(bytes),
                None if written[p as usize / 64] >> (p % 64) & 1 == 1 => match predict.kept(p..p + 1) {
                    Some(c) => Cow::Borrowed(c),
                    None => {
                        let mut c = Vec::with_capacity(*len);
                        predict.make(p, &mut c);
                        Cow::Owned(c)
                    }
                },
                None => Cow::Owned(vec![0; *len]),
            },
        }
    }

    /// The bytes in `range`.
    pub(crate) fn read(&self, range: Range<usize>) -> Cow<'_, [u8]> {
        match self {
            Buffer::Bytes(b) => Cow::Borrowed(&b[range]),
            // The whole chunk written last, as a ring forwards it: no lookup.
            Buffer::Predicted { len, last: Some((q, bytes)), .. }
                if *len > 0 && range.start == *q as usize * len && range.len() == *len =>
            {
                Cow::Borrowed(&bytes[..*len])
            }
            Buffer::Zeroed(len) => Cow::Owned(vec![0; *len][range].to_vec()),
            Buffer::Predicted { len, .. } if *len > 0 && range.start / len == range.end.saturating_sub(1) / len => {
                let p = range.start / len;
                let (from, to) = (range.start - p * len, range.end - p * len);
                match self.chunk(p as u32) {
                    Cow::Borrowed(c) => Cow::Borrowed(&c[from..to]),
                    // A chunk made to be read whole (an all-to-all's input, sent): no second copy.
                    Cow::Owned(c) if from == 0 && to == c.len() => Cow::Owned(c),
                    Cow::Owned(c) => Cow::Owned(c[from..to].to_vec()),
                }
            }
            Buffer::Predicted { .. } => Cow::Owned(self.to_vec()[range].to_vec()),
        }
    }

    /// Copies `bytes` in at `at`.
    pub(crate) fn write(&mut self, at: usize, bytes: &[u8]) {
        let len = match self {
            Buffer::Bytes(b) => return b[at..at + bytes.len()].copy_from_slice(bytes),
            Buffer::Zeroed(len) => {
                *self = Buffer::Bytes(vec![0; *len]);
                return self.write(at, bytes);
            }
            Buffer::Predicted { len, .. } => *len,
        };
        if len > 0 && bytes.len() == len && at.is_multiple_of(len) {
            // One whole chunk, as every receive of a collective writes.
            return self.set_chunk((at / len) as u32, bytes);
        }
        let mut done = 0;
        while done < bytes.len() {
            let (p, off) = ((at + done) / len, (at + done) % len);
            let n = (len - off).min(bytes.len() - done);
            if n == len {
                self.set_chunk(p as u32, &bytes[done..done + n]);
            } else {
                let mut chunk = self.chunk(p as u32).into_owned();
                assert!(off + n <= chunk.len(), "write at {at} of {} bytes past the buffer", bytes.len());
                chunk[off..off + n].copy_from_slice(&bytes[done..done + n]);
                self.set_chunk(p as u32, &chunk);
            }
            done += n;
        }
    }

    fn set_chunk(&mut self, p: u32, chunk: &[u8]) {
        let Buffer::Predicted { n, predict, written, differ, last, .. } = self else { return };
        assert!(p < *n, "chunk {p} past the buffer's {n}");
        written[p as usize / 64] |= 1 << (p % 64);
        // The last chunk's vector, reused.
        let mut kept = last.take().map(|(_, v)| v).unwrap_or_default();
        // Compared with the prediction as it is made, never made whole; then kept as it came
        // (the same bytes) for the ring to forward (a copy is cheaper than a lookup when read,
        // even of a chunk kept made).
        if predict.is(p, chunk) {
            differ.remove(&p);
            kept.clear();
            kept.extend_from_slice(chunk);
            *last = Some((p, kept));
        } else {
            differ.insert(p, chunk.to_vec());
        }
    }

    /// All its bytes.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        match self {
            Buffer::Bytes(b) => b.clone(),
            Buffer::Zeroed(len) => vec![0; *len],
            Buffer::Predicted { len, n, predict, written, differ, .. } => {
                let mut all = Vec::with_capacity(self.len());
                let predicted = |p: u32| written[p as usize / 64] >> (p % 64) & 1 == 1 && !differ.contains_key(&p);
                let mut p = 0;
                while p < *n {
                    if predicted(p) {
                        // A run of chunks as predicted: one copy if they are kept made.
                        let run = p..(p + 1..*n).find(|&q| !predicted(q)).unwrap_or(*n);
                        match predict.kept(run.clone()) {
                            Some(bytes) => all.extend_from_slice(bytes),
                            None => run.clone().for_each(|q| predict.make(q, &mut all)),
                        }
                        p = run.end;
                        continue;
                    }
                    match differ.get(&p) {
                        Some(bytes) => all.extend_from_slice(bytes),
                        None => all.resize(all.len() + len, 0),
                    }
                    p += 1;
                }
                all
            }
        }
    }

    /// All its bytes, taken.
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Buffer::Bytes(b) => b,
            b => b.to_vec(),
        }
    }
}

impl Default for Buffer {
    fn default() -> Self {
        Buffer::Bytes(Vec::new())
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Buffer::Bytes(b) => b.fmt(f),
            Buffer::Zeroed(len) => write!(f, "{len} zero bytes"),
            Buffer::Predicted { len, n, differ, .. } => {
                write!(f, "{n} chunks of {len} bytes, {} not as predicted", differ.len())
            }
        }
    }
}

/// Hashes as the bytes it stands for (an explorer's fingerprints do not see the form).
impl Hash for Buffer {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            Buffer::Bytes(b) => b.hash(h),
            b => b.to_vec().hash(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::DefaultHasher;

    use super::*;

    fn hash_of(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    /// Chunk p is `[p + 1; 3]`, all four kept made.
    struct Kept([u8; 12]);

    impl MakeChunk for Kept {
        fn put_chunk<S: ChunkSink>(&self, p: u32, out: &mut S) {
            out.put(&[p as u8 + 1; 3]);
        }

        fn kept(&self, ps: Range<u32>) -> Option<&[u8]> {
            self.0.get(ps.start as usize * 3..ps.end as usize * 3)
        }
    }

    #[test]
    fn a_predicted_buffer_reads_and_ends_as_the_plain_one_whatever_is_written() {
        let made = Chunks::from_fn(|p, out| out.put(&[p as u8 + 1; 3]));
        let kept = Chunks::new(Kept([1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]));
        for predict in [made.clone(), kept] {
            as_the_plain_one(predict);
        }
        let made = Buffer::made(3, 2, made);
        assert_eq!(made.to_vec(), [1, 1, 1, 2, 2, 2]);
        // Read whole, a made chunk is handed over as made; read in part, cut.
        assert_eq!(
            (made.read(3..6), made.read(4..6), made.read(0..1)),
            (vec![2; 3].into(), vec![2; 2].into(), vec![1].into())
        );
    }

    fn as_the_plain_one(predict: Chunks) {
        let mut plain = Buffer::Bytes(vec![0; 12]);
        let mut pred = Buffer::predicted(3, 4, predict.clone());
        let writes: [(usize, &[u8]); 5] =
            [(3, &[2, 2, 2]), (0, &[9, 9, 9]), (6, &[3]), (9, &[4, 4, 4]), (0, &[1, 1, 1])];
        for (at, bytes) in writes {
            plain.write(at, bytes);
            pred.write(at, bytes);
            assert_eq!(pred.to_vec(), plain.to_vec(), "after a write at {at}");
            assert_eq!(hash_of(&pred), hash_of(&plain));
            for r in [0..3, 3..6, 6..8, 2..7, 0..12] {
                assert_eq!(pred.read(r.clone()), plain.read(r));
            }
        }
        // Chunk 2 was written short (one byte of three): only it is held.
        let Buffer::Predicted { differ, .. } = &pred else { panic!() };
        assert_eq!(differ.keys().collect::<Vec<_>>(), [&2]);
        assert_eq!(pred.len(), 12);
        assert_eq!(pred.into_vec(), plain.into_vec());
        let mut zeroed = Buffer::Zeroed(6);
        assert_eq!(
            (zeroed.to_vec(), zeroed.read(1..3), hash_of(&zeroed)),
            (vec![0; 6], vec![0; 2].into(), hash_of(&Buffer::Bytes(vec![0; 6])))
        );
        zeroed.write(2, &[5]);
        assert!(matches!(&zeroed, Buffer::Bytes(b) if b == &[0, 0, 5, 0, 0, 0]), "{zeroed:?}");
    }
}
