//! Session ids that do not count. A session's id shows in its error messages ("session … holds
//! … bytes"), its stats and the bindings' handles; a plain counter there would tell a tenant how
//! many sessions the other tenants opened between two of its own. Each id is instead the process
//! counter put through a keyed permutation (a 4-round Feistel network over 52 bits, round keys
//! drawn once per process): unique like the counter (a permutation never collides, so the id
//! still keys what must not mix, such as the buffer pool's owners), but not in order, and below
//! 2^53 so that JavaScript numbers hold it exactly (the browser binding hands it out as f64).

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const HALF_BITS: u32 = 26;
const HALF_MASK: u64 = (1 << HALF_BITS) - 1;

static NEXT: AtomicU64 = AtomicU64::new(1);

fn keys() -> &'static std::collections::hash_map::RandomState {
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    KEYS.get_or_init(std::collections::hash_map::RandomState::new)
}

/// The keyed permutation of `n` (taken modulo 2^52).
fn permute(n: u64) -> u64 {
    let k = keys();
    let (mut l, mut r) = ((n >> HALF_BITS) & HALF_MASK, n & HALF_MASK);
    for round in 0u8..4 {
        let f = k.hash_one((round, r)) & HALF_MASK;
        (l, r) = (r, l ^ f);
    }
    (l << HALF_BITS) | r
}

/// A new session id: unique in the process, never 0 (0 is the default session where an owner
/// is needed), and saying nothing about how many sessions were opened before it.
pub(crate) fn next() -> u64 {
    loop {
        let id = permute(NEXT.fetch_add(1, Ordering::Relaxed));
        if id != 0 {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_nonzero_and_not_a_count() {
        let ids: Vec<u64> = (0..10_000).map(|_| super::next()).collect();
        let set: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(set.len(), ids.len());
        assert!(ids.iter().all(|&i| i != 0 && i < 1 << 53));
        // Consecutive ids are not consecutive numbers (a counter's would all differ by one).
        let steps = ids.windows(2).filter(|w| w[1].abs_diff(w[0]) <= 16).count();
        assert!(steps < 10, "{steps} of 9,999 consecutive ids lie within 16 of each other");
    }
}
