//! Parameter blocks written straight into host-visible uniform buffers (native adapters with
//! MAPPABLE_PRIMARY_BUFFERS). `queue.write_buffer` stages every upload and copies it on the GPU
//! in a command buffer of its own, which measured 13-20 µs of a 45-55 µs round trip on the H100
//! (BENCHMARKS.md item 26). A ring buffer is mapped while the host fills it, unmapped for the
//! submission that reads it (wgpu 30 on Vulkan: a flush where the memory is not coherent, no
//! copy), and mapped again once that submission is done: the map callback returns it to the
//! ring. When the ring has no mapped buffer left (nobody has polled since), the batch uses the
//! shared parameter buffer as before, so the ring never waits.
//!
//! Only the first `RING_BYTES` of a batch's blocks go to a ring buffer, and only in a batch that
//! follows a wait or a short batch: the round trip of a short batch is what the staging copy
//! costs; a long chain of small ops keeps the one staged upload per batch it was measured with.

use crate::{Error, Result};
use std::sync::{Arc, Mutex};

/// One ring buffer's size: 16 dispatches' blocks at the usual 256-byte offset alignment.
pub(super) const RING_BYTES: u64 = 4096;
/// Default number of ring buffers (`KILN_PARAM_RING=N` asks for N). Off: on the H100 the
/// ring's device (MAPPABLE_PRIMARY_BUFFERS requested) uploaded 256 MiB at 7.7-8.2 GB/s against
/// 10.6-10.8 without it (alternating, one run, BENCHMARKS.md item 39), a bigger loss than its
/// 6.5 µs off one op + synchronize (42-44 -> 36-37 µs).
pub(super) const RING_BUFFERS: usize = 0;

pub(super) struct ParamRing {
    /// Mapped buffers, ready for the host to fill.
    ready: Arc<Mutex<Vec<wgpu::Buffer>>>,
    /// Buffers created so far (at most `max`).
    created: Mutex<usize>,
    max: usize,
}

/// The ring buffer a batch's first blocks go to, and those blocks until the submit.
pub(super) struct RingSlot {
    pub(super) buffer: wgpu::Buffer,
    pub(super) bytes: Vec<u8>,
}

impl ParamRing {
    pub(super) fn new(max: usize) -> ParamRing {
        ParamRing { ready: Default::default(), created: Mutex::new(0), max }
    }

    pub(super) fn enabled(&self) -> bool {
        self.max > 0
    }

    /// A mapped buffer, a new one while fewer than `max` exist, or None (use the shared buffer).
    pub(super) fn take(&self, device: &wgpu::Device) -> Option<RingSlot> {
        if self.max == 0 {
            return None;
        }
        if let Some(buffer) = self.ready.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Some(RingSlot { buffer, bytes: Vec::new() });
        }
        let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
        if *created >= self.max {
            return None;
        }
        *created += 1;
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln param ring"),
            size: RING_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::MAP_WRITE,
            mapped_at_creation: true,
        });
        Some(RingSlot { buffer, bytes: Vec::new() })
    }

    /// Writes the slot's blocks and unmaps its buffer: call before the submit that reads it.
    /// Ring buffers are mapped by construction; should one not be, the batch fails rather than
    /// run on stale blocks.
    pub(super) fn seal(slot: &RingSlot) -> Result<()> {
        if !slot.bytes.is_empty() {
            let mut view = slot
                .buffer
                .get_mapped_range_mut(..slot.bytes.len() as u64)
                .map_err(|e| Error::Internal(format!("parameter ring buffer not mapped: {e}")))?;
            view.copy_from_slice(&slot.bytes);
        }
        slot.buffer.unmap();
        Ok(())
    }

    /// Maps the slot's buffer again once the submission that reads it is done, back into the
    /// ring. Call after that submit. A failed map (device lost or destroyed) drops the buffer.
    pub(super) fn recycle(&self, slot: RingSlot) {
        let ready = self.ready.clone();
        let buffer = slot.buffer.clone();
        slot.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            if r.is_ok() {
                ready.lock().unwrap_or_else(|p| p.into_inner()).push(buffer);
            }
        });
    }
}
