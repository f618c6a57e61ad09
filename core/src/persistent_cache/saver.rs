//! The one saver thread of the process (a save once compiles have been quiet for `QUIET`) and
//! the exit-time save.

use super::PersistentCache;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// How long after the last compile the saver thread writes the cache.
const QUIET: Duration = Duration::from_millis(1500);

/// The one saver thread of the process and the caches it looks after.
pub(super) struct Saver {
    caches: Mutex<Vec<Weak<PersistentCache>>>,
    /// Bumped by every compile; the thread saves once it stops moving for `QUIET`.
    generation: Mutex<u64>,
    wake: Condvar,
}

pub(super) fn saver() -> &'static Saver {
    static SAVER: once_cell::sync::OnceCell<&'static Saver> = once_cell::sync::OnceCell::new();
    SAVER.get_or_init(|| {
        let s: &'static Saver = Box::leak(Box::new(Saver {
            caches: Mutex::new(Vec::new()),
            generation: Mutex::new(0),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new().name("kiln-cache-saver".into()).spawn(move || s.run());
        if spawned.is_ok() {
            register_at_exit();
        }
        s
    })
}

impl Saver {
    pub(super) fn register(&self, c: &Arc<PersistentCache>) {
        let mut all = self.caches.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(c));
    }

    pub(super) fn poke(&self) {
        *self.generation.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.wake.notify_one();
    }

    fn save_all(&self) {
        let live: Vec<_> =
            self.caches.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(Weak::upgrade).collect();
        for c in live {
            c.save_if_dirty();
        }
    }

    fn run(&self) {
        let mut seen = 0;
        loop {
            let mut g = self.generation.lock().unwrap_or_else(|p| p.into_inner());
            while *g == seen {
                g = self.wake.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            // Wait until no compile has come for QUIET.
            loop {
                seen = *g;
                g = self.wake.wait_timeout(g, QUIET).unwrap_or_else(|p| p.into_inner()).0;
                if *g == seen {
                    break;
                }
            }
            drop(g);
            self.save_all();
        }
    }
}

/// The process that registered the handler: a forked child inherits it, and must not touch the
/// parent's Vulkan device (unsupported after fork).
static REGISTERED_BY: AtomicU64 = AtomicU64::new(0);

extern "C" fn save_at_exit() {
    if REGISTERED_BY.load(Ordering::SeqCst) != std::process::id() as u64 {
        return;
    }
    // Nothing may unwind out of an atexit handler.
    let _ = std::panic::catch_unwind(|| saver().save_all());
}

/// Saves every dirty cache when the process exits normally (`exit`, returning from main, Python's
/// and the BEAM's shutdown). Registered after the Vulkan driver was loaded, so it runs before the
/// driver's own exit-time destructors (atexit handlers run in reverse order of registration).
fn register_at_exit() {
    extern "C" {
        fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
    }
    REGISTERED_BY.store(std::process::id() as u64, Ordering::SeqCst);
    // SAFETY: registering a plain function with the C library's atexit.
    unsafe {
        atexit(save_at_exit);
    }
}
