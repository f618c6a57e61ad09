//! Buffer pool with size classes. Freed buffers are held back until the batch that may still
//! use them has been submitted, so a reused buffer is never written before its last reader ran.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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

#[derive(Default)]
pub(crate) struct Pool {
    free: Mutex<HashMap<Key, Vec<wgpu::Buffer>>>,
    deferred: Mutex<Vec<(Key, wgpu::Buffer)>>,
    cached_bytes: AtomicU64,
    pub(crate) cap_bytes: u64,
}

impl Pool {
    pub(crate) fn new(cap_bytes: u64) -> Pool {
        Pool { cap_bytes, ..Default::default() }
    }

    pub(crate) fn take(&self, class: u64, usage: wgpu::BufferUsages) -> Option<wgpu::Buffer> {
        let mut free = self.free.lock().unwrap();
        let buf = free.get_mut(&(class, usage.bits()))?.pop()?;
        self.cached_bytes.fetch_sub(class, Ordering::Relaxed);
        Some(buf)
    }

    /// A buffer freed during the open batch, for an output that only GPU commands recorded
    /// later in the same batch will write (they run after every earlier reader).
    pub(crate) fn take_deferred(&self, class: u64, usage: wgpu::BufferUsages) -> Option<wgpu::Buffer> {
        let mut deferred = self.deferred.lock().unwrap();
        let i = deferred.iter().rposition(|(k, _)| *k == (class, usage.bits()))?;
        Some(deferred.swap_remove(i).1)
    }

    /// A buffer whose last use may still be in the open batch.
    pub(crate) fn release(&self, class: u64, usage: wgpu::BufferUsages, buf: wgpu::Buffer) {
        self.deferred.lock().unwrap().push(((class, usage.bits()), buf));
    }

    /// A buffer known to be idle (staging buffers after their map completed).
    pub(crate) fn release_idle(&self, class: u64, usage: wgpu::BufferUsages, buf: wgpu::Buffer) -> Option<u64> {
        self.put(((class, usage.bits()), buf))
    }

    fn put(&self, (key, buf): (Key, wgpu::Buffer)) -> Option<u64> {
        if self.cached_bytes.load(Ordering::Relaxed) + key.0 > self.cap_bytes {
            buf.destroy();
            return Some(key.0);
        }
        self.cached_bytes.fetch_add(key.0, Ordering::Relaxed);
        self.free.lock().unwrap().entry(key).or_default().push(buf);
        None
    }

    /// Called after each submit: deferred buffers become reusable. Returns bytes destroyed.
    pub(crate) fn on_submit(&self) -> u64 {
        let items: Vec<_> = std::mem::take(&mut *self.deferred.lock().unwrap());
        items.into_iter().filter_map(|it| self.put(it)).sum()
    }

    /// Destroys every cached buffer; returns the bytes given back.
    pub(crate) fn clear(&self) -> u64 {
        let mut free = self.free.lock().unwrap();
        let mut total = 0;
        for ((class, _), bufs) in free.drain() {
            for b in bufs {
                b.destroy();
                total += class;
            }
        }
        self.cached_bytes.store(0, Ordering::Relaxed);
        total
    }

    pub(crate) fn cached_bytes(&self) -> u64 {
        self.cached_bytes.load(Ordering::Relaxed)
    }
}
