//! The open command batch: dispatches and copies are recorded into one encoder and submitted
//! when a result is read, when the batch is full, on synchronize, or early (the flush policy).

use super::bind_cache::{BindCache, BindGroupStats, BoundRef};
use super::op_timing::OpTimes;
use super::param_ring::{ParamRing, RingSlot, RING_BYTES};
use super::{Binding, Device, MAX_BATCH_DISPATCHES, MAX_PARAMS_BYTES};
use crate::gpu_timer::Timer;
use crate::pipeline::Pipeline;
use crate::platform::Instant;
use crate::stats::counters::count_error;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// Early submits, so that the GPU starts on big work while the host records what follows: the
/// first once the batch's dispatches have bound this many bytes, each next one after twice as
/// many as the last (up to `FLUSH_GROWTH` times this), back to the start whenever the host
/// waits for the GPU. A submit costs the host ~50 µs and the GPU a short gap (measured on the
/// H200: submitting every 256 MiB cost big ops 15-30%), so a long queue of big work gets a few
/// submits, not one per op (and a chain of small ops one after 256 of them, see
/// `DISPATCH_FLOOR_BYTES`).
/// `KILN_FLUSH_BYTES` overrides the first threshold (0: no early submits).
pub(super) const FLUSH_BYTES: u64 = 256 << 20;
/// Each dispatch counts as at least this many bytes: a dispatch costs the GPU ~2 µs however
/// little it touches (measured on the H200: 1000 dependent tiny ops, 2.1 µs each), so a long
/// chain of small ops also gets an early submit (after 256 of them) and runs while the host
/// records the rest.
const DISPATCH_FLOOR_BYTES: u64 = 1 << 20;
pub(super) const FLUSH_GROWTH: u64 = 16;

pub(super) struct Batch {
    pub(super) encoder: Option<wgpu::CommandEncoder>,
    pub(super) pass: Option<wgpu::ComputePass<'static>>,
    pub(super) dispatches: usize,
    /// Bytes bound by the dispatches recorded since the last submit (see `FLUSH_BYTES`).
    pub(super) bound_bytes: u64,
    /// The bound bytes at which the next early submit happens (0: never).
    pub(super) flush_at: u64,
    pub(super) params: Vec<u8>,
    /// While a GPU timer runs, each pass opened writes begin/end timestamps into it.
    pub(super) timer: Option<Timer>,
    /// The timestamps of this batch's per-op timed passes (profiling, GPU budgets): resolved
    /// and read back at submit (`op_timing`).
    pub(super) op_times: Option<OpTimes>,
    /// The ring buffer holding this batch's first parameter blocks (`param_ring`), if any.
    pub(super) ring: Option<RingSlot>,
    /// Whether this batch may take a ring buffer: after the host waited, or after a short batch
    /// (`RING_AFTER_DISPATCHES`). A long chain of small ops (its batches follow one another
    /// without waits) keeps the shared buffer it was measured with.
    pub(super) ring_ok: bool,
    /// Dispatches recorded on this device so far (the recording-cost harness divides by it).
    pub(super) recorded: u64,
    /// Bind groups kept across dispatches (`bind_cache`), under the batch's lock.
    pub(super) binds: BindCache,
}

/// A batch of at most this many dispatches lets the next one take a ring buffer.
const RING_AFTER_DISPATCHES: usize = 16;

impl Device {
    /// Records one dispatch into the open batch; `params` is a uniform block bound at its slot.
    /// `work` is its real work in operations where the caller knows it (a session's kernel:
    /// invocations x its loop budget); None counts a memory-bound built-in dispatch: the larger
    /// of its invocations and the 4-byte elements it binds (each invocation's loops walk data
    /// bound to it; the ops whose work outgrows their data charge it themselves, see
    /// `exec::charge_work`). Counts it in the metrics (its op's and its session's counters),
    /// charged before anything is recorded, or the error it fails with. While a profile runs on an adapter without timestamp queries, the dispatch is
    /// submitted and waited for on its own and the wall clock of that is its time.
    pub(crate) fn dispatch(
        &self,
        pipe: &Pipeline,
        bindings: &[Binding<'_>],
        params: Option<(u32, &[u8])>,
        groups: [u32; 3],
        work: Option<u64>,
    ) -> Result<()> {
        let wall = crate::stats::recording::active() && !self.has_timestamps() && !groups.contains(&0);
        if !wall {
            return self.dispatch_counted(pipe, bindings, params, groups, work).map_err(count_error);
        }
        self.synchronize().map_err(count_error)?;
        let start = crate::platform::Instant::now();
        self.dispatch_counted(pipe, bindings, params, groups, work).map_err(count_error)?;
        self.synchronize().map_err(count_error)?;
        crate::stats::recording::add_wall(&pipe.op, start.elapsed());
        Ok(())
    }

    fn dispatch_counted(
        &self,
        pipe: &Pipeline,
        bindings: &[Binding<'_>],
        params: Option<(u32, &[u8])>,
        groups: [u32; 3],
        work: Option<u64>,
    ) -> Result<()> {
        self.check_alive()?;
        let max = self.limits.max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > max) {
            return Err(Error::InvalidArgument(format!(
                "workgroup count {groups:?} is over this device's limit of {max} per dimension"
            )));
        }
        // Drivers count workgroups in 32 bits: (4096, 4096, 257) ran x*y*z mod 2^32 of them.
        if groups.iter().map(|&g| g as u64).product::<u64>() > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "workgroup count {groups:?} is over 2^32 - 1 workgroups in total"
            )));
        }
        if groups.contains(&0) {
            return Ok(());
        }
        let mut batch = self.batch.lock().unwrap();
        self.check_not_revoked(bindings.iter().map(|b| b.buffer))?;
        // A plan's capture (`plan.rs`) binds the shared parameter buffer through a dynamic
        // offset, so that its bind group holds wherever a replay puts the block.
        let capturing = crate::device::capture::capturing(self);
        if capturing && params.is_some() && !pipe.dynamic_params {
            crate::device::capture::refuse(self, "a parameter block without a dynamic offset");
        }
        let bound = bindings.iter().map(|b| b.size.unwrap_or_else(|| b.buffer.size())).sum::<u64>();
        let invocations =
            groups.iter().map(|&g| g as u64).product::<u64>().saturating_mul(pipe.group_invocations as u64);
        let ops = work.unwrap_or_else(|| invocations.max(bound / 4));
        let session = crate::session::current_inner();
        if let Some(session) = &session {
            session.check_gpu_budget()?;
            session.charge_ops(ops)?;
        }
        let profiling = crate::stats::recording::active();
        // Timed dispatches get a compute pass of their own, so each pass's time is one op's.
        let timed = self.has_timestamps() && (profiling || session.as_ref().is_some_and(|s| s.has_gpu_budget()));
        let align = (self.limits.min_uniform_buffer_offset_alignment as usize).max(16);
        let param_len = params.map_or(0, |(_, p)| p.len().next_multiple_of(16).max(16));
        if param_len > MAX_PARAMS_BYTES {
            return Err(Error::InvalidArgument(format!(
                "uniform block of {param_len} bytes is over {MAX_PARAMS_BYTES}"
            )));
        }
        if batch.dispatches >= MAX_BATCH_DISPATCHES
            || batch.params.len().next_multiple_of(align) + param_len > self.params_capacity
        {
            self.submit_locked(&mut batch)?;
        }
        // What the bind group binds: the buffers, then the parameter block (see `bind_cache`).
        let mut binds: Vec<BoundRef<'_>> = Vec::with_capacity(bindings.len() + 1);
        binds.extend(bindings.iter().map(|b| (b.slot, b.buffer, 0, b.size.map(|s| s.max(4)))));
        if params.is_some() && batch.ring.is_none() && batch.ring_ok && !capturing {
            batch.ring = self.param_ring.take(&self.device);
        }
        let Batch { params: shared, ring, binds: cache, .. } = &mut *batch;
        let mut dynamic_offset = None;
        if let Some((slot, p)) = params {
            // The batch's first blocks go to its ring buffer while they fit (`param_ring`).
            let (bytes, buffer) = match ring {
                Some(r) if !capturing && (r.bytes.len().next_multiple_of(align) + param_len) as u64 <= RING_BYTES => {
                    self.ring_dispatches.fetch_add(1, Ordering::Relaxed);
                    (&mut r.bytes, &r.buffer)
                }
                _ => (shared, &self.params_buffer),
            };
            let offset = bytes.len().next_multiple_of(align);
            bytes.resize(offset, 0);
            bytes.extend_from_slice(p);
            bytes.resize(offset + param_len, 0);
            // A pipeline whose parameter block has a dynamic offset gets it at set_bind_group, so
            // its bind group does not depend on where in the batch's blocks this one went.
            let at = if pipe.dynamic_params {
                dynamic_offset = Some(offset as u32);
                0
            } else {
                offset as u64
            };
            binds.push((slot, buffer, at, Some(param_len as u64)));
        }
        let gone = self.pool.take_destroyed();
        cache.forget(&gone);
        let bind_group = pipe.layout.as_ref().map(|layout| {
            cache.get_or_create(layout, &binds, || {
                let entries: Vec<wgpu::BindGroupEntry<'_>> = binds
                    .iter()
                    .map(|(slot, buffer, offset, size)| wgpu::BindGroupEntry {
                        binding: *slot,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset: *offset,
                            size: size.map(|s| wgpu::BufferSize::new(s).unwrap()),
                        }),
                    })
                    .collect();
                self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout, entries: &entries })
            })
        });
        let Batch { encoder, pass, timer, op_times, .. } = &mut *batch;
        let encoder = encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
        if timed {
            *pass = None;
        }
        let pass = pass.get_or_insert_with(|| {
            let timestamp_writes = if timed {
                let times = op_times.get_or_insert_with(|| OpTimes::new(&self.device));
                times.next_pass(&pipe.op, session.as_ref(), profiling)
            } else {
                timer.as_mut().and_then(|t| t.next_pass())
            };
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes }).forget_lifetime()
        });
        pass.set_pipeline(&pipe.pipeline);
        if let Some(bg) = &bind_group {
            pass.set_bind_group(0, bg, dynamic_offset.as_slice());
        }
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        if capturing {
            if timed || profiling {
                crate::device::capture::refuse(self, "a timed dispatch");
            }
            crate::device::capture::record(
                self,
                crate::device::capture::Step {
                    pipeline: pipe.pipeline.clone(),
                    op: pipe.op.clone(),
                    bind_group: bind_group.clone(),
                    params: params.map_or(Vec::new(), |(_, p)| crate::device::capture::words(p)),
                    param_len,
                    groups,
                    follow: None,
                    ops,
                    bound,
                },
            );
        }
        if timed {
            // Ends the pass, so that its end timestamp covers this dispatch alone.
            batch.pass = None;
        }
        batch.dispatches += 1;
        batch.recorded += 1;
        batch.bound_bytes += bound.max(DISPATCH_FLOOR_BYTES);
        pipe.op.record_dispatch(ops, bound);
        if let Some(s) = &session {
            s.record_bound_bytes(bound);
        }
        if profiling {
            crate::stats::recording::count_call(&pipe.op);
        }
        if batch.flush_at > 0 && batch.bound_bytes >= batch.flush_at {
            batch.flush_at = (batch.flush_at * 2).min(self.flush_bytes * FLUSH_GROWTH);
            self.submit_locked(&mut batch)?;
        }
        Ok(())
    }

    /// Records a plan's dispatches (`Plan::replay`, plan.rs) under one lock: each block
    /// (`words` holds the followers' patched blocks in order, `groups` their workgroups) goes
    /// into the batch's shared parameter buffer, bound through the captured bind group at its
    /// dynamic offset. No checks, keys or cache probes: the capture made them.
    pub(crate) fn replay(
        &self,
        steps: &[crate::device::capture::Step],
        words: &[u32],
        groups: &[[u32; 3]],
    ) -> Result<()> {
        self.check_alive()?;
        let align = (self.limits.min_uniform_buffer_offset_alignment as usize).max(16);
        let (mut w, mut g) = (0usize, 0usize);
        let mut batch = self.batch.lock().unwrap();
        for s in steps {
            let (block, groups): (&[u32], [u32; 3]) = match s.follow {
                Some(_) => {
                    let b = &words[w..w + s.params.len()];
                    w += s.params.len();
                    g += 1;
                    (b, groups[g - 1])
                }
                None => (&s.params, s.groups),
            };
            if batch.dispatches >= MAX_BATCH_DISPATCHES
                || batch.params.len().next_multiple_of(align) + s.param_len > self.params_capacity
            {
                self.submit_locked(&mut batch)?;
            }
            let mut offset = None;
            if s.param_len > 0 {
                let at = batch.params.len().next_multiple_of(align);
                batch.params.resize(at, 0);
                batch.params.extend_from_slice(bytemuck::cast_slice(block));
                batch.params.resize(at + s.param_len, 0);
                offset = Some(at as u32);
            }
            let Batch { encoder, pass, timer, .. } = &mut *batch;
            let encoder = encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
            let pass = pass.get_or_insert_with(|| {
                let timestamp_writes = timer.as_mut().and_then(|t| t.next_pass());
                encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes })
                    .forget_lifetime()
            });
            pass.set_pipeline(&s.pipeline);
            if let Some(bg) = &s.bind_group {
                pass.set_bind_group(0, bg, offset.as_slice());
            }
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
            batch.dispatches += 1;
            batch.recorded += 1;
            batch.bound_bytes += s.bound.max(DISPATCH_FLOOR_BYTES);
            s.op.record_dispatch(s.ops, s.bound);
            if batch.flush_at > 0 && batch.bound_bytes >= batch.flush_at {
                batch.flush_at = (batch.flush_at * 2).min(self.flush_bytes * FLUSH_GROWTH);
                self.submit_locked(&mut batch)?;
            }
        }
        Ok(())
    }

    /// Records a buffer-to-buffer copy in the batch, after every dispatch recorded so far.
    pub(crate) fn copy(
        &self,
        src: &wgpu::Buffer,
        src_off: u64,
        dst: &wgpu::Buffer,
        dst_off: u64,
        bytes: u64,
    ) -> Result<()> {
        self.check_alive()?;
        if bytes == 0 {
            return Ok(());
        }
        crate::device::capture::refuse(self, "a copy");
        let mut batch = self.batch.lock().unwrap();
        self.check_not_revoked([src, dst])?;
        batch.pass = None;
        let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
        enc.copy_buffer_to_buffer(src, src_off, dst, dst_off, bytes);
        batch.dispatches += 1;
        Ok(())
    }

    /// Records zeroing `buffer` in the batch, after every command recorded so far.
    /// (Only allocation clears, once per handover of a buffer: a plan's capture keeps what it
    /// allocates, so its replays need not repeat it.)
    pub(super) fn clear(&self, buffer: &wgpu::Buffer) {
        let mut batch = self.batch.lock().unwrap();
        batch.pass = None;
        let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
        enc.clear_buffer(buffer, 0, None);
        batch.dispatches += 1;
    }

    pub(super) fn submit_locked(&self, batch: &mut Batch) -> Result<Option<wgpu::SubmissionIndex>> {
        batch.pass = None;
        let Some(encoder) = batch.encoder.take() else {
            // Nothing recorded: buffers freed since the last submit have no pending reader.
            let destroyed = self.pool.on_submit();
            self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
            return Ok(None);
        };
        let _submit = crate::startup::span("submit (parameters, encoder finish, queue submit)");
        let t0 = Instant::now();
        if !batch.params.is_empty() {
            self.queue.write_buffer(&self.params_buffer, 0, &batch.params);
            batch.params.clear();
        }
        let ring = batch.ring.take();
        if let Some(r) = &ring {
            ParamRing::seal(r)?;
        }
        batch.ring_ok = batch.dispatches <= RING_AFTER_DISPATCHES;
        batch.dispatches = 0;
        batch.bound_bytes = 0;
        let mut encoder = encoder;
        let readback = batch.op_times.take().and_then(|t| t.resolve(&self.device, &mut encoder));
        let t1 = Instant::now();
        let commands = encoder.finish();
        let t2 = Instant::now();
        let idx = self.queue.submit([commands]);
        let t3 = Instant::now();
        if let Some(r) = ring {
            self.param_ring.recycle(r);
        }
        self.phases.set(t1 - t0, t2 - t1, t3 - t2);
        if let Some(r) = readback {
            self.times_submitted(r);
        }
        let destroyed = self.pool.on_submit();
        self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
        self.take_uncaptured()?;
        Ok(Some(idx))
    }

    /// Submits the open batch, or an empty one, on a live device: lets a driver that frees
    /// destroyed objects only at a submission (lavapipe) free them.
    pub(crate) fn submit_now(&self) {
        if self.check_alive().is_err() {
            return;
        }
        let mut batch = self.batch.lock().unwrap();
        if batch.encoder.is_some() {
            let _ = self.submit_locked(&mut batch);
        } else {
            self.queue.submit([]);
        }
    }

    /// Submits the open batch without waiting.
    pub fn flush(&self) -> Result<()> {
        self.check_alive()?;
        let mut batch = self.batch.lock().unwrap();
        self.submit_locked(&mut batch).map(|_| ())
    }
}

/// Host time of the last submit's phases (the `latency_phases` bench row): uploading the shared
/// parameter block and sealing the ring buffer (`upload`), `encoder.finish` (`finish`) and
/// `queue.submit` (`submit`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SubmitPhases {
    pub upload: std::time::Duration,
    pub finish: std::time::Duration,
    pub submit: std::time::Duration,
}

/// `SubmitPhases` of the last submit, kept without a lock (nanoseconds).
#[derive(Default)]
pub(super) struct PhaseClock([std::sync::atomic::AtomicU64; 3]);

impl PhaseClock {
    fn set(&self, upload: std::time::Duration, finish: std::time::Duration, submit: std::time::Duration) {
        for (slot, d) in self.0.iter().zip([upload, finish, submit]) {
            slot.store(d.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn get(&self) -> SubmitPhases {
        let [u, f, s] = [0, 1, 2].map(|i| std::time::Duration::from_nanos(self.0[i].load(Ordering::Relaxed)));
        SubmitPhases { upload: u, finish: f, submit: s }
    }
}

impl Device {
    /// Host time of the last submit's phases (for the latency benchmark's split).
    #[doc(hidden)]
    pub fn last_submit_phases(&self) -> SubmitPhases {
        self.phases.get()
    }

    /// Whether short batches' parameter blocks go through the mapped ring on this device.
    #[doc(hidden)]
    pub fn has_param_ring(&self) -> bool {
        self.param_ring.enabled()
    }

    /// Compute dispatches recorded on this device so far (for measuring host cost per dispatch).
    #[doc(hidden)]
    pub fn dispatches_recorded(&self) -> u64 {
        self.batch.lock().unwrap().recorded
    }

    /// Hits, misses and entries of this device's bind-group cache (`bind_cache`).
    #[doc(hidden)]
    pub fn bind_group_stats(&self) -> BindGroupStats {
        self.batch.lock().unwrap().binds.stats()
    }

    /// Drops the cached bind groups of the buffers destroyed since the last dispatch.
    pub(super) fn forget_destroyed(&self) {
        let gone = self.pool.take_destroyed();
        self.batch.lock().unwrap().binds.forget(&gone);
    }

    /// Dispatches whose parameter block went through the mapped ring (`param_ring`), for tests.
    #[doc(hidden)]
    pub fn param_ring_dispatches(&self) -> u64 {
        self.ring_dispatches.load(Ordering::Relaxed)
    }
}
