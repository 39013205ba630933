//! Zeller's delta debugging: a 1-minimal sublist that still passes a test.

/// Shrinks `items` to a sublist for which `keeps` is still true, trying the empty list first,
/// then halves and complements at growing granularity. The result is 1-minimal: removing any
/// single remaining item makes `keeps` false. `keeps(items)` is assumed true and not called.
/// Every call to `keeps` that returns true is adopted at once, so the last such call saw the
/// result (callers may record side results there).
pub fn ddmin<T: Clone>(items: Vec<T>, keeps: &mut dyn FnMut(&[T]) -> bool) -> Vec<T> {
    if items.is_empty() || keeps(&[]) {
        return Vec::new();
    }
    let mut items = items;
    let mut n = 2usize;
    while items.len() >= 2 {
        let size = items.len().div_ceil(n);
        let chunks: Vec<&[T]> = items.chunks(size).collect();
        let mut next: Option<(Vec<T>, usize)> = None;
        for c in &chunks {
            if keeps(c) {
                next = Some((c.to_vec(), 2));
                break;
            }
        }
        if next.is_none() && chunks.len() > 2 {
            for i in 0..chunks.len() {
                let rest: Vec<T> =
                    chunks.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, c)| c.iter().cloned()).collect();
                if keeps(&rest) {
                    next = Some((rest, (n - 1).max(2)));
                    break;
                }
            }
        }
        match next {
            Some((kept, granularity)) => {
                items = kept;
                n = granularity;
            }
            None if n >= items.len() => break,
            None => n = (n * 2).min(items.len()),
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_two_items_that_matter() {
        let items: Vec<u32> = (0..40).collect();
        let mut calls = 0;
        let got = ddmin(items, &mut |s: &[u32]| {
            calls += 1;
            s.contains(&7) && s.contains(&31)
        });
        assert_eq!(got, vec![7, 31]);
        assert!(calls < 120, "{calls} calls");
    }

    #[test]
    fn empty_when_nothing_matters_and_whole_when_everything_does() {
        assert!(ddmin(vec![1, 2, 3], &mut |_: &[i32]| true).is_empty());
        assert_eq!(ddmin(vec![1, 2, 3], &mut |s: &[i32]| s.len() == 3), vec![1, 2, 3]);
    }
}
