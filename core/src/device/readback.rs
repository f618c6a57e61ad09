//! Readbacks started now and collected later: the copy into a staging buffer is recorded and
//! submitted, its mapping asked for, and the caller goes on recording GPU work; it checks
//! whether the bytes have arrived without blocking ([`PendingRead::is_ready`]) and collects them
//! when it needs them ([`PendingRead::wait_bytes`], a wait under the device's timeout like any
//! other; in the page [`PendingRead::wait_bytes_async`], awaited: the mapping's promise resolves
//! only once the page's thread is back in its event loop). A decode loop reads its token ids
//! this way while it records the next tokens.

use super::transfer::{Staging, STAGING_USAGE};
use super::Device;
use crate::dtype::{DType, Element};
use crate::stats::counters::count_error;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::mpsc;
use std::sync::Arc;

type Mapped = std::result::Result<(), wgpu::BufferAsyncError>;

/// Where the mapping's callback sends its outcome: a channel the poller's thread feeds natively,
/// a one-shot the page's event loop feeds (and an `await` can wait on) in the browser.
#[cfg(not(target_arch = "wasm32"))]
type MapRx = mpsc::Receiver<Mapped>;
#[cfg(target_arch = "wasm32")]
type MapRx = crate::platform::Receiver<Mapped>;

#[cfg(not(target_arch = "wasm32"))]
fn map_channel() -> (mpsc::Sender<Mapped>, MapRx) {
    mpsc::channel()
}
#[cfg(target_arch = "wasm32")]
fn map_channel() -> (crate::platform::Sender<Mapped>, MapRx) {
    crate::platform::oneshot()
}

/// A readback on its way (see the module doc). Dropped before it is collected, it frees its
/// staging buffer (the copy may still run; nothing reads it).
pub struct PendingRead {
    device: Arc<Device>,
    /// None once collected, or for zero bytes.
    staging: Option<Staging>,
    rx: Option<MapRx>,
    /// The mapping's outcome once `is_ready` has seen it.
    mapped: Option<Mapped>,
    dtype: DType,
}

impl Device {
    /// Records the copy of `bytes` bytes of `src` (submitting the batch) and asks for its
    /// mapping; `dtype` is what the bytes hold (bool: one u32 word per element on the device).
    pub(crate) fn start_read(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, dtype: DType) -> Result<PendingRead> {
        let _start = crate::startup::span("readback started (copy recorded, submitted)");
        let staging = self.begin_read(src, bytes).map_err(count_error)?;
        let (tx, rx) = map_channel();
        if let Some(s) = &staging {
            s.buffer.slice(..s.padded).map_async(wgpu::MapMode::Read, move |r| {
                #[allow(clippy::let_unit_value)] // mpsc's send gives a Result, the one-shot's ()
                let _ = tx.send(r);
            });
        }
        Ok(PendingRead { device: self.clone(), staging, rx: Some(rx), mapped: None, dtype })
    }

    /// One poll that never waits, skipped when another poll runs (wgpu-core 30 panics when two
    /// polls retire the same submissions at once; see `wait`): delivers finished mappings.
    /// In the page the browser delivers them (at its event loop's turn): nothing to poll.
    #[cfg(not(target_arch = "wasm32"))]
    fn poll_now(&self) {
        let guard = match self.poll_lock.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if guard.is_some() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.device.poll(wgpu::PollType::Poll)));
        }
    }

    /// Destroys a staging buffer whose mapping may still be pending (never back to the pool).
    fn discard_staging(&self, s: Staging) {
        s.buffer.destroy();
        self.mem.allocated.fetch_sub(s.class, Ordering::Relaxed);
    }
}

impl PendingRead {
    /// Whether the bytes have arrived (or the read has failed, or the device is lost: then
    /// `wait_bytes` answers at once with the error). Never blocks.
    pub fn is_ready(&mut self) -> bool {
        if self.mapped.is_some() || self.staging.is_none() || self.device.is_lost() {
            return true;
        }
        let Some(rx) = &self.rx else { return true };
        if let Some(m) = try_take(rx) {
            self.mapped = m;
            return true;
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.device.poll_now();
            if let Some(m) = try_take(rx) {
                self.mapped = m;
                return true;
            }
        }
        false
    }

    /// The bytes (bool: one 0/1 byte per element), waiting for them if they have not arrived:
    /// under the device's timeout (`KILN_TIMEOUT_MS`) from this call, as every wait.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_bytes(mut self) -> Result<Vec<u8>> {
        self.collect_blocking().map_err(count_error)
    }

    /// `wait_bytes` as values of the tensor's dtype.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_vec<T: Element>(self) -> Result<Vec<T>> {
        self.check_element::<T>()?;
        Ok(bytemuck::pod_collect_to_vec(&self.wait_bytes()?))
    }

    /// [`wait_bytes`](Self::wait_bytes), awaited: the page's way (it cannot block while the GPU
    /// answers). Resolves once the mapping has and every error scope popped so far is answered.
    #[cfg(target_arch = "wasm32")]
    pub async fn wait_bytes_async(mut self) -> Result<Vec<u8>> {
        let dev = self.device.clone();
        let mapped = match (self.mapped.take(), self.rx.take()) {
            (Some(m), _) => Some(m),
            (None, Some(rx)) => rx.await,
            (None, None) => None,
        };
        let settled = crate::platform::settle_scopes().await;
        let Some(staging) = self.staging.take() else { return settled.map(|()| Vec::new()) };
        if let Err(e) = settled {
            dev.discard_staging(staging);
            return Err(count_error(e));
        }
        let Some(mapped) = mapped else {
            dev.discard_staging(staging);
            return Err(count_error(dev.fault("the GPU callback was dropped".into())));
        };
        self.finish(staging, mapped).map_err(count_error)
    }

    /// `wait_bytes_async` as values of the tensor's dtype.
    #[cfg(target_arch = "wasm32")]
    pub async fn wait_vec_async<T: Element>(self) -> Result<Vec<T>> {
        self.check_element::<T>()?;
        Ok(bytemuck::pod_collect_to_vec(&self.wait_bytes_async().await?))
    }

    fn check_element<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype || self.dtype == DType::Bool {
            return Err(Error::DTypeMismatch(format!("wait_vec::<{}> on a read of a {} tensor", T::DTYPE, self.dtype)));
        }
        Ok(())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn collect_blocking(&mut self) -> Result<Vec<u8>> {
        let dev = self.device.clone();
        let Some(staging) = self.staging.take() else { return Ok(Vec::new()) };
        let mapped = match (self.mapped.take(), self.rx.take()) {
            (Some(m), _) => m,
            (None, Some(rx)) => match dev.wait(rx) {
                Ok(m) => m,
                Err(e) => {
                    dev.discard_staging(staging);
                    return Err(e);
                }
            },
            (None, None) => {
                dev.discard_staging(staging);
                return Err(dev.fault("the GPU callback was dropped".into()));
            }
        };
        let out = self.finish(staging, mapped)?;
        dev.settle_times()?;
        Ok(out)
    }

    /// The mapped staging buffer's bytes (the buffer back to the pool).
    fn finish(&self, staging: Staging, mapped: Mapped) -> Result<Vec<u8>> {
        let dev = &self.device;
        if let Err(e) = dev.check_alive() {
            dev.discard_staging(staging);
            return Err(e);
        }
        let mut out = vec![0u8; staging.bytes as usize];
        let words = self.dtype == DType::Bool;
        dev.finish_read(staging, mapped, |view| out.copy_from_slice(view))?;
        if words {
            let w: Vec<u32> = bytemuck::pod_collect_to_vec(&out);
            let mut b = vec![0u8; w.len()];
            crate::dtype::words_to_bools(&w, &mut b);
            return Ok(b);
        }
        Ok(out)
    }
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        let Some(s) = self.staging.take() else { return };
        // A mapped buffer goes back to the pool; one whose mapping is pending is destroyed.
        let mapped = self.mapped.take().or_else(|| self.rx.as_ref().and_then(try_take).flatten());
        if matches!(mapped, Some(Ok(()))) && !self.device.is_lost() {
            s.buffer.unmap();
            let destroyed = self.device.pool.release_idle(s.class, STAGING_USAGE, s.buffer);
            self.device.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
        } else {
            self.device.discard_staging(s);
        }
    }
}

/// The mapping's outcome if the callback has run: Some(Some(outcome)), Some(None) when it was
/// dropped without one (an error the collect reports), None while it is pending.
#[cfg(not(target_arch = "wasm32"))]
fn try_take(rx: &MapRx) -> Option<Option<Mapped>> {
    match rx.try_recv() {
        Ok(m) => Some(Some(m)),
        Err(mpsc::TryRecvError::Disconnected) => Some(None),
        Err(mpsc::TryRecvError::Empty) => None,
    }
}

#[cfg(target_arch = "wasm32")]
fn try_take(rx: &MapRx) -> Option<Option<Mapped>> {
    rx.try_take()
}
