//! Per-op GPU time: while a profile runs, or for a session with a GPU-time budget, each
//! dispatch gets a compute pass of its own whose begin and end write timestamps (`OpTimes`,
//! one query set per batch). At submit the batch's timestamps are resolved and copied to a
//! host-readable buffer in the same submission; the times are read and charged (to the op's
//! histogram, the session, the profile) when a read or synchronize waits for the GPU anyway,
//! or at a later submit once the GPU is done with them.

use super::{Device, MAX_BATCH_DISPATCHES};
use crate::session::SessionInner;
use crate::stats::counters::OpStats;
use crate::Result;
use std::sync::{mpsc, Arc};

/// Passes one batch can time (a pass per dispatch while timing; copies are no passes).
pub(super) const MAX_TIMED_PASSES: u32 = MAX_BATCH_DISPATCHES as u32;

/// Whom one timed pass is charged to.
pub(super) struct Mark {
    op: Arc<OpStats>,
    session: Option<Arc<SessionInner>>,
    /// The profile that was running when the pass was recorded (0: none).
    profile: u64,
}

/// The open batch's timed passes: two queries each, in recording order.
pub(super) struct OpTimes {
    set: wgpu::QuerySet,
    marks: Vec<Mark>,
}

/// Timestamps on their way back from the GPU.
pub(super) struct Readback {
    buffer: wgpu::Buffer,
    marks: Vec<Mark>,
}

struct Pending {
    buffer: wgpu::Buffer,
    marks: Vec<Mark>,
    mapped: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// Pending readbacks of a device.
#[derive(Default)]
pub(super) struct PendingTimes(std::sync::Mutex<Vec<Pending>>);

impl OpTimes {
    pub(super) fn new(device: &wgpu::Device) -> OpTimes {
        let set = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("kiln op times"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * MAX_TIMED_PASSES,
        });
        OpTimes { set, marks: Vec::new() }
    }

    /// The timestamp writes for the next pass, charged to `op` and `session`; None when the set
    /// is full (the pass then runs untimed).
    pub(super) fn next_pass(
        &mut self,
        op: &Arc<OpStats>,
        session: Option<&Arc<SessionInner>>,
        profiling: bool,
    ) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        let i = self.marks.len() as u32;
        if i >= MAX_TIMED_PASSES {
            return None;
        }
        let profile = if profiling { crate::stats::recording::generation() } else { 0 };
        self.marks.push(Mark { op: op.clone(), session: session.cloned(), profile });
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        })
    }

    /// Records the resolve and the copy to a readable buffer at the end of the batch.
    pub(super) fn resolve(self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) -> Option<Readback> {
        if self.marks.is_empty() {
            return None;
        }
        let queries = 2 * self.marks.len() as u32;
        let bytes = queries as u64 * wgpu::QUERY_SIZE as u64;
        let resolved = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln op times resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln op times readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.resolve_query_set(&self.set, 0..queries, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &buffer, 0, bytes);
        Some(Readback { buffer, marks: self.marks })
    }
}

impl Device {
    /// Whether per-op GPU time is measured with timestamps. Never in the browser: the times are
    /// read back by the blocking waits, which a page does not have.
    pub(crate) fn has_timestamps(&self) -> bool {
        !cfg!(target_arch = "wasm32") && self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// The batch with `r`'s timestamps was submitted: map them, charge what is ready already.
    pub(super) fn times_submitted(&self, r: Readback) {
        let (tx, rx) = mpsc::channel();
        r.buffer.slice(..).map_async(wgpu::MapMode::Read, move |m| {
            let _ = tx.send(m);
        });
        let mut pending = self.pending_times.0.lock().unwrap_or_else(|p| p.into_inner());
        pending.push(Pending { buffer: r.buffer, marks: r.marks, mapped: rx });
        // Whatever the GPU finished meanwhile (a submit retires done work) is charged now, so
        // that a session that never reads still meets its budget.
        pending.retain_mut(|p| match p.mapped.try_recv() {
            Ok(m) => {
                self.charge_times(&p.buffer, &p.marks, m);
                false
            }
            Err(mpsc::TryRecvError::Empty) => true,
            Err(mpsc::TryRecvError::Disconnected) => false,
        });
    }

    /// Waits for every pending readback and charges its times (reads and synchronize call this
    /// after their own wait, when the GPU is done with their work anyway).
    pub(super) fn settle_times(&self) -> Result<()> {
        let pending = {
            let mut pending = self.pending_times.0.lock().unwrap_or_else(|p| p.into_inner());
            if pending.is_empty() {
                return Ok(());
            }
            std::mem::take(&mut *pending)
        };
        let mut pending = pending.into_iter();
        while let Some(p) = pending.next() {
            match self.wait(p.mapped) {
                Ok(m) => self.charge_times(&p.buffer, &p.marks, m),
                Err(e) => {
                    // The rest stays pending (a lost device drops them with itself).
                    self.pending_times.0.lock().unwrap_or_else(|p| p.into_inner()).extend(pending);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn charge_times(
        &self,
        buffer: &wgpu::Buffer,
        marks: &[Mark],
        mapped: std::result::Result<(), wgpu::BufferAsyncError>,
    ) {
        if mapped.is_err() {
            return;
        }
        let period_ns = self.queue.get_timestamp_period() as f64;
        {
            let Ok(view) = buffer.slice(..).get_mapped_range() else { return };
            let ticks: &[u8] = &view;
            for (mark, pair) in marks.iter().zip(ticks.chunks_exact(16)) {
                let begin = u64::from_le_bytes(pair[..8].try_into().unwrap_or_default());
                let end = u64::from_le_bytes(pair[8..].try_into().unwrap_or_default());
                // A driver may report an end before its begin for a tiny pass: zero, not a wrap.
                let ns = (end.saturating_sub(begin) as f64 * period_ns) as u64;
                mark.op.record_gpu_ns(ns);
                if let Some(s) = &mark.session {
                    s.charge_gpu_ns(ns);
                }
                if mark.profile != 0 {
                    crate::stats::recording::add_gpu(mark.profile, &mark.op, ns);
                }
            }
        }
        buffer.unmap();
    }
}
