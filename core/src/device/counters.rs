//! Zeroed u32 counters for kernels that count their own workgroups: the one-pass split-KV
//! attention (`ops/attention/decode.rs`), where the last workgroup of a row to finish merges the row's
//! splits. A kernel that uses them sets every counter it incremented back to 0 before it ends,
//! so one buffer serves every dispatch: dispatches that bind it read-write run one after another
//! (wgpu orders them), and a dispatch that never finishes takes the device with it. Grown (a new
//! zeroed buffer) when a dispatch needs more, never shrunk; not a tensor, so no session owns or
//! pays for it, and it holds nothing but zeros between dispatches.

use super::Device;
use crate::{Error, Result};
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Counters(Mutex<Option<wgpu::Buffer>>);

impl Device {
    /// A buffer of at least `n` u32 counters, all 0 before the next dispatch recorded.
    pub(crate) fn self_resetting_counters(&self, n: usize) -> Result<wgpu::Buffer> {
        self.check_alive()?;
        let mut slot = self.counters.0.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = (n.max(1) as u64).checked_mul(4).ok_or_else(|| Error::InvalidArgument(format!("{n} counters")))?;
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        // At least 256 counters, and doubling, so that a growing decode reallocates rarely.
        let size = bytes.max(1024).next_power_of_two();
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln self-resetting counters"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // WebGPU zero-fills new buffers already; written anyway, as the kernels depend on it.
        self.queue.write_buffer(&b, 0, &vec![0u8; size as usize]);
        *slot = Some(b.clone());
        Ok(b)
    }
}
