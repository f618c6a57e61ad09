//! Waiting for the GPU in the browser: WebGPU delivers every answer through the page's event
//! loop, so a wait is an `await` and nothing polls the device. The blocking waits of the native
//! API answer Unsupported here, naming the async call to use instead.

use super::Device;
use crate::platform::{oneshot, settle_scopes};
use crate::{Error, Result};
use std::sync::{mpsc, Arc};

impl Device {
    /// The browser polls the device itself.
    pub(super) fn start_poller(_dev: &Arc<Device>) {}

    /// A blocking wait would never end: the answer can only arrive once the page's thread is free.
    pub(super) fn wait<T>(&self, _rx: mpsc::Receiver<T>) -> Result<T> {
        Err(Error::Unsupported(
            "blocking waits are not available in the browser: use the async API \
             (to_bytes_async / to_vec_async / synchronize_async)"
                .into(),
        ))
    }

    /// Submits everything queued and resolves once the GPU has finished it (and every error
    /// scope opened so far has been answered).
    pub async fn synchronize_async(&self) -> Result<()> {
        self.check_alive()?;
        self.flush()?;
        let (tx, rx) = oneshot();
        self.queue.on_submitted_work_done(move || tx.send(()));
        let done = rx.await;
        settle_scopes().await?;
        self.check_alive()?;
        done.ok_or_else(|| Error::Internal("the GPU callback was dropped".into()))?;
        self.take_uncaptured()
    }
}
