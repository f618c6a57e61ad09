//! Two parts of a model's load that need nothing of each other, run at once: parsing a
//! tokenizer (host work only) while the device opens and the weights upload. `main` runs on the
//! caller's thread, so the device it uses is the caller's (`kiln_core::with_device` is per
//! thread); `side` must not touch a device. A page (wasm32) has one thread: one after the other.

/// `(side(), main())`, `side` on a scoped thread of its own where one can be started (else after
/// `main`, on the caller's thread).
pub(crate) fn join<A: Send, B>(side: impl FnOnce() -> A + Send, main: impl FnOnce() -> B) -> (A, B) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::Mutex;
        // Where the thread cannot start, `side` is still here to run.
        let cell = Mutex::new(Some(side));
        let take = || cell.lock().unwrap_or_else(|p| p.into_inner()).take();
        std::thread::scope(|s| {
            let spawned =
                std::thread::Builder::new().name("kiln-load-side".into()).spawn_scoped(s, || take().map(|f| f()));
            let b = main();
            let a = match spawned.map(|h| h.join()) {
                Ok(Ok(Some(a))) => a,
                // A panic on the side thread is the caller's, as if it had run here.
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Ok(Ok(None)) | Err(_) => take().map(|f| f()).expect("`side` runs on the thread or here, once"),
            };
            (a, b)
        })
    }
    #[cfg(target_arch = "wasm32")]
    {
        let a = side();
        (a, main())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_run_and_main_stays_on_the_callers_thread() {
        let here = std::thread::current().id();
        let (a, b) = super::join(|| std::thread::current().id(), || std::thread::current().id());
        assert_eq!(b, here);
        assert_ne!(a, here);
    }
}
