//! Where a wrong chunk's bytes came from, told by the bytes themselves: every payload of a
//! workload is derived from (seed, op, sender, receiver), so a chunk that equals another
//! operation's payload names it. For worlds that do not record connections (the real NVSHMEM
//! plugin).

use bootsim_nvshmem::workload::{allgather_slice, alltoall_chunk, barrier_word, OpSpec};

/// A description of `chunk`'s origin, if its bytes tell it.
pub(crate) fn of_chunk(specs: &[OpSpec], seed: u64, n: u32, chunk: &[u8]) -> Option<String> {
    if chunk.iter().all(|&b| b == 0) {
        return Some(format!("{} zero bytes: nothing was written into it", chunk.len()));
    }
    for (i, spec) in specs.iter().enumerate() {
        let i32_ = i as u32;
        match *spec {
            OpSpec::Alltoall(len) if len == chunk.len() => {
                for p in 0..n {
                    for q in 0..n {
                        if alltoall_chunk(seed, i32_, p, q, len) == chunk {
                            return Some(format!("alltoall #{i}'s chunk from rank {p} for rank {q}"));
                        }
                    }
                }
            }
            OpSpec::Allgather(len) if len == chunk.len() => {
                if let Some(p) = (0..n).find(|&p| allgather_slice(seed, i32_, p, len) == chunk) {
                    return Some(format!("allgather #{i}'s slice of rank {p}"));
                }
            }
            _ => {}
        }
    }
    if chunk.len() > 4 && chunk[4..].iter().all(|&b| b == 0) {
        let word = &chunk[..4];
        let whose = specs.iter().enumerate().filter(|(_, s)| matches!(s, OpSpec::Barrier)).find_map(|(i, _)| {
            (0..n).find(|&p| barrier_word(p, i as u32) == word).map(|p| format!(" (barrier #{i}'s word of rank {p})"))
        });
        let hex: String = word.iter().map(|b| format!("{b:02x}")).collect();
        return Some(format!(
            "a 4-byte message {hex}{} copied into its first bytes, the other {} bytes zero: a barrier's message taken for this one",
            whose.unwrap_or_default(),
            chunk.len() - 4
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_payloads_short_copies_and_zeros() {
        let specs = [OpSpec::Alltoall(48), OpSpec::Barrier, OpSpec::Alltoall(48)];
        let other = alltoall_chunk(7, 2, 1, 0, 48);
        assert_eq!(of_chunk(&specs, 7, 2, &other).unwrap(), "alltoall #2's chunk from rank 1 for rank 0");
        let mut short = vec![0u8; 48];
        short[..4].copy_from_slice(&barrier_word(0, 1));
        let s = of_chunk(&specs, 7, 2, &short).unwrap();
        assert!(s.contains("barrier #1's word of rank 0") && s.contains("other 44 bytes zero"), "{s}");
        assert!(of_chunk(&specs, 7, 2, &[0; 48]).unwrap().starts_with("48 zero bytes"));
        assert_eq!(of_chunk(&specs, 7, 2, &[9; 48]), None);
    }
}
