//! Buffer pool with size classes. Freed buffers are held back until the batch that may still
//! use them has been submitted, so a reused buffer is never written before its last reader ran.
//! Over its cap the pool gives back the buffers freed longest ago, not the one just freed: a
//! program's working set moves on (measured: a pool full of an earlier phase's 256 MiB buffers
//! made every 224 MiB buffer of the next phase a fresh allocation, ~1 ms of host time each).
//!
//! Each pooled buffer remembers its owner (the session whose tensor held it, `DEFAULT_OWNER`
//! for the default session): `take_for` prefers one of the asker's own buffers and says when it
//! hands out another owner's, which the caller must clear before anyone reads it (issue 28: a
//! session's `empty()` read another session's freed bytes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Rounds a request up to its size class: powers of two up to 64 MiB, then 16 MiB steps
/// (a power-of-two class would waste up to half of a big tensor).
pub fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(16);
    const BIG: u64 = 64 << 20;
    const STEP: u64 = 16 << 20;
    if b <= BIG {
        b.next_power_of_two()
    } else {
        b.div_ceil(STEP) * STEP
    }
}

type Key = (u64, u32);

/// Who last held a pooled buffer's bytes: a session's id, or this for the default session (and
/// for staging buffers, which never hold a tensor). Session ids are never 0.
pub(crate) const DEFAULT_OWNER: u64 = 0;

/// A buffer out of the pool; `foreign` when its bytes are another owner's (clear before use).
pub(crate) struct Taken {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) foreign: bool,
}

/// Index of the most recently freed buffer of `key` in `items` (oldest first), the asker's own
/// if it has one.
fn pick(items: &[(Key, u64, wgpu::Buffer)], key: Key, owner: u64) -> Option<usize> {
    let own = items.iter().rposition(|(k, o, _)| *k == key && *o == owner);
    own.or_else(|| items.iter().rposition(|(k, _, _)| *k == key))
}

#[derive(Default)]
pub(crate) struct Pool {
    /// Oldest first; `take` picks the most recently freed buffer of its class.
    free: Mutex<VecDeque<(Key, u64, wgpu::Buffer)>>,
    deferred: Mutex<Vec<(Key, u64, wgpu::Buffer)>>,
    cached_bytes: AtomicU64,
    pub(crate) cap_bytes: u64,
    /// Buffers destroyed since `take_destroyed` last looked, for the device's bind-group cache
    /// to forget (`device::bind_cache`), and whether there are any (read on every dispatch).
    destroyed: Mutex<Vec<wgpu::Buffer>>,
    any_destroyed: AtomicBool,
}

impl Pool {
    pub(crate) fn new(cap_bytes: u64) -> Pool {
        Pool { cap_bytes, ..Default::default() }
    }

    /// A staging buffer (they hold no tensor: whose they were does not matter).
    pub(crate) fn take(&self, class: u64, usage: wgpu::BufferUsages) -> Option<wgpu::Buffer> {
        self.take_for(class, usage, DEFAULT_OWNER).map(|t| t.buffer)
    }

    /// An idle buffer of `class` for `owner`: its own most recently freed one, else another
    /// owner's (`foreign`).
    pub(crate) fn take_for(&self, class: u64, usage: wgpu::BufferUsages, owner: u64) -> Option<Taken> {
        let mut free = self.free.lock().unwrap();
        let i = pick(free.make_contiguous(), (class, usage.bits()), owner)?;
        let (_, was, buffer) = free.remove(i)?;
        self.cached_bytes.fetch_sub(class, Ordering::Relaxed);
        Some(Taken { buffer, foreign: was != owner })
    }

    /// A buffer freed during the open batch, for an output that only GPU commands recorded
    /// later in the same batch will write (they run after every earlier reader).
    pub(crate) fn take_deferred(&self, class: u64, usage: wgpu::BufferUsages, owner: u64) -> Option<Taken> {
        let mut deferred = self.deferred.lock().unwrap();
        let i = pick(&deferred, (class, usage.bits()), owner)?;
        let (_, was, buffer) = deferred.swap_remove(i);
        Some(Taken { buffer, foreign: was != owner })
    }

    /// A buffer whose last use may still be in the open batch; its bytes are `owner`'s.
    pub(crate) fn release(&self, class: u64, usage: wgpu::BufferUsages, owner: u64, buf: wgpu::Buffer) {
        self.deferred.lock().unwrap().push(((class, usage.bits()), owner, buf));
    }

    /// A buffer known to be idle (staging buffers after their map completed). Returns the bytes
    /// destroyed to stay within the cap.
    pub(crate) fn release_idle(&self, class: u64, usage: wgpu::BufferUsages, buf: wgpu::Buffer) -> u64 {
        self.put(((class, usage.bits()), DEFAULT_OWNER, buf))
    }

    /// Caches `buf`, first destroying the buffers freed longest ago while the cap would be
    /// exceeded (or `buf` itself, when it alone is over the cap). Returns the bytes destroyed.
    fn put(&self, (key, owner, buf): (Key, u64, wgpu::Buffer)) -> u64 {
        if key.0 > self.cap_bytes {
            self.destroy(buf);
            return key.0;
        }
        let mut free = self.free.lock().unwrap();
        let mut destroyed = 0;
        while self.cached_bytes.load(Ordering::Relaxed) + key.0 > self.cap_bytes {
            let Some(((class, _), _, old)) = free.pop_front() else { break };
            self.destroy(old);
            self.cached_bytes.fetch_sub(class, Ordering::Relaxed);
            destroyed += class;
        }
        self.cached_bytes.fetch_add(key.0, Ordering::Relaxed);
        free.push_back((key, owner, buf));
        destroyed
    }

    /// Called after each submit: deferred buffers become reusable. Returns bytes destroyed.
    pub(crate) fn on_submit(&self) -> u64 {
        let items: Vec<_> = std::mem::take(&mut *self.deferred.lock().unwrap());
        items.into_iter().map(|it| self.put(it)).sum()
    }

    /// Destroys every cached buffer; returns the bytes given back.
    pub(crate) fn clear(&self) -> u64 {
        let mut free = self.free.lock().unwrap();
        let mut total = 0;
        for ((class, _), _, b) in free.drain(..) {
            self.destroy(b);
            total += class;
        }
        self.cached_bytes.store(0, Ordering::Relaxed);
        total
    }

    /// Destroys `buf` (a buffer Kiln allocated: the pool's own, or a closed session's) and
    /// remembers it until `take_destroyed`.
    pub(crate) fn destroy(&self, buf: wgpu::Buffer) {
        buf.destroy();
        self.destroyed.lock().unwrap().push(buf);
        self.any_destroyed.store(true, Ordering::Release);
    }

    /// The buffers destroyed since the last call (none without taking the lock when there are
    /// none: called on every dispatch).
    pub(crate) fn take_destroyed(&self) -> Vec<wgpu::Buffer> {
        if !self.any_destroyed.load(Ordering::Relaxed) || !self.any_destroyed.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.destroyed.lock().unwrap())
    }

    pub(crate) fn cached_bytes(&self) -> u64 {
        self.cached_bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_cap_the_oldest_buffers_go() {
        let dev = crate::device().unwrap();
        let usage = wgpu::BufferUsages::STORAGE;
        let make = |size: u64| {
            dev.device.create_buffer(&wgpu::BufferDescriptor { label: None, size, usage, mapped_at_creation: false })
        };
        let pool = Pool::new(3 << 10);
        for _ in 0..3 {
            assert_eq!(pool.release_idle(1 << 10, usage, make(1 << 10)), 0);
        }
        assert_eq!(pool.cached_bytes(), 3 << 10);
        // A 2 KiB buffer pushes out the two 1 KiB buffers freed first, not itself.
        assert_eq!(pool.release_idle(2 << 10, usage, make(2 << 10)), 2 << 10);
        assert_eq!(pool.cached_bytes(), 3 << 10);
        assert!(pool.take(2 << 10, usage).is_some());
        assert!(pool.take(1 << 10, usage).is_some());
        assert!(pool.take(1 << 10, usage).is_none());
        assert_eq!(pool.cached_bytes(), 0);
        // One buffer over the whole cap is not kept.
        assert_eq!(pool.release_idle(4 << 10, usage, make(4 << 10)), 4 << 10);
        assert_eq!(pool.cached_bytes(), 0);
    }
}
