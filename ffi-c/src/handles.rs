//! Handles: what a `KilnTensor *` or `KilnKernel *` holds on the C side.
//!
//! # Design, and why not the alternatives
//!
//! A handle is **not an address**. It is a number that names an entry of a process-wide table
//! (one for tensors, one for kernels): `KIND << 48 | mix(id) << 3` on 64-bit targets, where
//! `KIND` is 0x4B54 ("KT") for tensors and 0x4B4B ("KK") for kernels, `id` comes from a counter
//! that only goes up, and `mix` is a bijection (multiplication by an odd constant modulo 2^45)
//! that spreads consecutive ids apart, so a handle plus or minus a small offset (C pointer
//! arithmetic gone wrong) does not land on the next tensor. The table maps `id` to an `Arc`. Every entry point looks a handle
//! up (under a read lock) and works on a clone of that `Arc`, so:
//!
//! - a double free, a use after free, a kernel passed as a tensor, a pointer to random memory or
//!   to a stack variable are found **without dereferencing anything the caller gave us**: the
//!   value is decoded and looked up, and anything that is not a live handle of the right kind is
//!   `KILN_ERR_INVALID_ARGUMENT` with a message saying which of these it looks like;
//! - a stale handle can never name a newer object: ids are never reused (2^45 of them; at a
//!   million tensors a second that is a millennium), unlike a slot table whose generation
//!   counter wraps;
//! - freeing a tensor while another thread is inside a call that uses it is safe: the free
//!   only removes the table's `Arc`; the reader keeps its own clone until its call returns, and
//!   the GPU buffer goes back to the pool when the last clone drops. A call that starts after
//!   the free gets `INVALID_ARGUMENT`.
//!
//! The top 16 bits make the value a non-canonical address on x86-64 (and one outside any user
//! mapping on AArch64 without tagging), so C code that dereferences a handle by mistake faults
//! at once instead of reading some other object.
//!
//! The alternatives considered:
//! - rustls-ffi (its `Castable` types, owned as `Box` or `Arc`) hands out `Box::into_raw` /
//!   `Arc::into_raw` pointers and checks only for NULL:
//!   a double free or a foreign pointer is undefined behaviour there (it documents that as the
//!   caller's bug). Not enough for issue 19.
//! - SQLite tags each allocation with a magic number (`sqlite3SafetyCheckOk`) and checks it on
//!   entry. That catches many use-after-frees on a best-effort basis but must read the memory
//!   the pointer names: a pointer to unmapped memory still crashes, and freed memory reused by
//!   a new object of the same type passes the check (the "stale pointer reads a newer tensor"
//!   finding).
//!
//! The cost is a hash lookup under an uncontended `RwLock` read per tensor argument and a
//! write-locked insert per result: nanoseconds next to a GPU submission.
//!
//! On 32-bit targets the layout is `KIND << 28 | id << 3` with a 4-bit kind and a 25-bit id that
//! wraps after 2^25 handles (ids still live are skipped, so a live handle is never handed out
//! twice; a handle freed 2^25 creations ago could alias a new one there).

use kiln_core::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

#[cfg(target_pointer_width = "64")]
mod layout {
    pub(super) const KIND_SHIFT: u32 = 48;
    pub(super) const ID_BITS: u32 = 45;
    pub(super) const TENSOR: usize = 0x4B54;
    pub(super) const KERNEL: usize = 0x4B4B;
    /// "KS"
    pub(super) const SESSION: usize = 0x4B53;
}
#[cfg(target_pointer_width = "32")]
mod layout {
    pub(super) const KIND_SHIFT: u32 = 28;
    pub(super) const ID_BITS: u32 = 25;
    pub(super) const TENSOR: usize = 0xA;
    pub(super) const KERNEL: usize = 0xB;
    pub(super) const SESSION: usize = 0xC;
}
use layout::*;

const ID_SHIFT: u32 = 3;
const ID_MASK: usize = (1 << ID_BITS) - 1;

/// An odd multiplier (the 64-bit golden ratio) and its inverse modulo 2^64 (hence modulo
/// 2^ID_BITS): `mix` and `unmix` are inverse bijections of the ids.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
const UNMIX: u64 = {
    // Newton's iteration for the inverse of an odd number modulo 2^64 (each step doubles the
    // number of correct low bits; 3 correct to start, 6 steps give 192).
    let mut inv = MIX;
    let mut i = 0;
    while i < 6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(MIX.wrapping_mul(inv)));
        i += 1;
    }
    inv
};
const _: () = assert!(MIX.wrapping_mul(UNMIX) == 1);

fn mix(id: usize) -> usize {
    ((id as u64).wrapping_mul(MIX) & ID_MASK as u64) as usize
}

fn unmix(m: usize) -> usize {
    ((m as u64).wrapping_mul(UNMIX) & ID_MASK as u64) as usize
}

/// The kind of object a table holds (for handle values and messages).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Tensor,
    Kernel,
    Session,
}

impl Kind {
    fn tag(self) -> usize {
        match self {
            Kind::Tensor => TENSOR,
            Kind::Kernel => KERNEL,
            Kind::Session => SESSION,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Tensor => "tensor",
            Kind::Kernel => "kernel",
            Kind::Session => "session",
        }
    }
    /// The kind whose tag `tag` is, if any.
    fn of_tag(tag: usize) -> Option<Kind> {
        [Kind::Tensor, Kind::Kernel, Kind::Session].into_iter().find(|k| k.tag() == tag)
    }
}

/// One table of live handles of one kind.
pub(crate) struct Table<T> {
    kind: Kind,
    live: RwLock<HashMap<usize, Arc<T>>>,
    /// The next id to hand out (ids start at 1, so no handle is NULL).
    next: Mutex<usize>,
    /// Whether `next` has wrapped (only possible on 32-bit targets).
    wrapped: std::sync::atomic::AtomicBool,
}

impl<T> Table<T> {
    pub(crate) fn new(kind: Kind) -> Self {
        Table { kind, live: RwLock::new(HashMap::new()), next: Mutex::new(1), wrapped: Default::default() }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<usize, Arc<T>>> {
        // Nothing panics while holding the lock; recover from poisoning anyway.
        self.live.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<usize, Arc<T>>> {
        self.live.write().unwrap_or_else(|e| e.into_inner())
    }

    fn encode(&self, id: usize) -> usize {
        (self.kind.tag() << KIND_SHIFT) | (mix(id) << ID_SHIFT)
    }

    /// Stores `value` and returns its new handle value (never 0).
    pub(crate) fn insert(&self, value: T) -> Result<usize> {
        let value = Arc::new(value);
        let mut live = self.write();
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        if live.len() >= ID_MASK - 1 {
            return Err(Error::QuotaExceeded(format!(
                "{} live {} handles: the handle table is full",
                live.len(),
                self.kind.name()
            )));
        }
        let id = loop {
            let id = *next;
            *next = if id == ID_MASK {
                self.wrapped.store(true, std::sync::atomic::Ordering::Relaxed);
                1
            } else {
                id + 1
            };
            if !live.contains_key(&id) {
                break id;
            }
        };
        live.insert(id, value);
        Ok(self.encode(id))
    }

    /// The object behind handle value `h`, or why there is none. `what` names the argument.
    pub(crate) fn get(&self, h: usize, what: &str) -> Result<Arc<T>> {
        let id = self.id_of(h, what)?;
        if let Some(v) = self.read().get(&id) {
            return Ok(v.clone());
        }
        Err(self.not_live(h, id, what))
    }

    /// Removes handle `h` from the table and gives back the table's reference (dropped by the
    /// caller, outside the lock; other threads may still hold clones).
    pub(crate) fn remove(&self, h: usize, what: &str) -> Result<Arc<T>> {
        let id = self.id_of(h, what)?;
        let removed = self.write().remove(&id);
        removed.ok_or_else(|| self.not_live(h, id, what))
    }

    /// Number of live handles.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    fn id_of(&self, h: usize, what: &str) -> Result<usize> {
        let kind = h >> KIND_SHIFT;
        let id = unmix((h >> ID_SHIFT) & ID_MASK);
        let well_formed = h & ((1 << ID_SHIFT) - 1) == 0 && id != 0;
        if well_formed && kind == self.kind.tag() {
            return Ok(id);
        }
        let name = self.kind.name();
        let other = Kind::of_tag(kind).filter(|&k| k != self.kind);
        Err(if let (true, Some(other)) = (well_formed, other) {
            Error::InvalidArgument(format!(
                "{what} ({h:#x}) is not a {name} handle: it has the form of a Kiln{} handle",
                capitalised(other.name())
            ))
        } else {
            Error::InvalidArgument(format!(
                "{what} ({h:#x}) is not a {name} handle from this library (a foreign, corrupted or uninitialised pointer)"
            ))
        })
    }

    fn not_live(&self, h: usize, id: usize, what: &str) -> Error {
        let name = self.kind.name();
        let issued = self.wrapped.load(std::sync::atomic::Ordering::Relaxed)
            || id < *self.next.lock().unwrap_or_else(|e| e.into_inner());
        Error::InvalidArgument(if issued {
            format!("{what} ({h:#x}) is a {name} that was already freed (use after free or double free)")
        } else {
            format!("{what} ({h:#x}) is not a {name} handle from this library (never issued)")
        })
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// The process's tensors.
pub(crate) fn tensors() -> &'static Table<kiln_core::Tensor> {
    static T: OnceLock<Table<kiln_core::Tensor>> = OnceLock::new();
    T.get_or_init(|| Table::new(Kind::Tensor))
}

/// The process's kernels.
pub(crate) fn kernels() -> &'static Table<kiln_core::Kernel> {
    static K: OnceLock<Table<kiln_core::Kernel>> = OnceLock::new();
    K.get_or_init(|| Table::new(Kind::Kernel))
}

/// The process's sessions.
pub(crate) fn sessions() -> &'static Table<kiln_core::Session> {
    static S: OnceLock<Table<kiln_core::Session>> = OnceLock::new();
    S.get_or_init(|| Table::new(Kind::Session))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<T: std::fmt::Debug>(r: Result<T>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code(), kiln_core::ErrorCode::InvalidArgument, "{e}");
        e.message().to_string()
    }

    #[test]
    fn mix_is_a_bijection_of_the_ids() {
        for id in [1usize, 2, 3, 1000, ID_MASK - 1, ID_MASK] {
            assert_eq!(unmix(mix(id)), id);
            assert!(mix(id) <= ID_MASK);
        }
        assert_ne!(mix(2).abs_diff(mix(1)), 1);
    }

    #[test]
    fn handles_are_tagged_never_null_never_reused() {
        let t: Table<u32> = Table::new(Kind::Tensor);
        let a = t.insert(7).unwrap();
        let b = t.insert(8).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(a >> KIND_SHIFT, TENSOR);
        assert_eq!(a & 7, 0);
        assert_eq!(*t.get(a, "x").unwrap(), 7);
        assert_eq!(*t.remove(a, "x").unwrap(), 7);
        // double free and use after free
        assert!(msg(t.remove(a, "x")).contains("already freed"));
        assert!(msg(t.get(a, "x")).contains("already freed"));
        // a new object never takes the freed handle
        let c = t.insert(9).unwrap();
        assert_ne!(c, a);
        assert!(t.get(a, "x").is_err());
        assert_eq!(*t.get(c, "x").unwrap(), 9);
        assert_eq!(*t.get(b, "x").unwrap(), 8);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn foreign_values_are_errors() {
        let t: Table<u32> = Table::new(Kind::Tensor);
        let k: Table<u32> = Table::new(Kind::Kernel);
        let a = t.insert(1).unwrap();
        let kh = k.insert(2).unwrap();
        assert!(msg(t.get(kh, "t")).contains("is not a tensor handle: it has the form of a KilnKernel handle"));
        assert!(msg(k.get(a, "kernel")).contains("is not a kernel handle: it has the form of a KilnTensor handle"));
        let local = 5u64;
        for bogus in [&local as *const u64 as usize, 0xdead_beef, 1, usize::MAX, a + 1, a ^ (1 << (usize::BITS - 1))] {
            assert!(msg(t.get(bogus, "t")).contains("not a tensor handle from this library"), "{bogus:#x}");
        }
        // well formed, never issued
        assert!(msg(t.get(t.encode(100), "t")).contains("never issued"));
        // near misses of live handles (pointer arithmetic) are not live handles
        let many: Vec<usize> = (0..1000).map(|i| t.insert(i).unwrap()).collect();
        for &h in &many {
            for d in [8usize, 16, 24, 4096] {
                assert!(
                    t.get(h.wrapping_add(d), "t").is_err() && t.get(h.wrapping_sub(d), "t").is_err(),
                    "{h:#x} +- {d}"
                );
            }
        }
        assert_eq!(many.iter().map(|&h| *t.get(h, "t").unwrap()).sum::<u32>(), 999 * 1000 / 2);
    }

    #[test]
    fn a_reader_keeps_the_object_alive_across_a_free() {
        let t: Table<Vec<u8>> = Table::new(Kind::Tensor);
        let h = t.insert(vec![1, 2, 3]).unwrap();
        let held = t.get(h, "t").unwrap();
        drop(t.remove(h, "t").unwrap());
        assert_eq!(*held, vec![1, 2, 3]);
        assert!(t.get(h, "t").is_err());
    }
}
