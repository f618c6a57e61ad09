//! GPU timers on a device (the timestamp bookkeeping itself is in `gpu_timer`).

use super::Device;
use crate::gpu_timer::{summarize, GpuTime, Timer};
use crate::{Error, Result};
use std::sync::Arc;

impl Device {
    /// Starts timing GPU work with timestamp queries: every compute pass recorded from now on
    /// writes its begin and end time. Returns false (and times nothing) where the adapter has no
    /// timestamp queries. Work recorded before this call is submitted first and not counted.
    /// One timer per device at a time (InvalidArgument otherwise); passes other threads record
    /// meanwhile are timed too.
    pub fn start_gpu_timer(&self) -> Result<bool> {
        self.check_alive()?;
        if !self.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Ok(false);
        }
        let mut batch = self.batch.lock().unwrap();
        if batch.timer.is_some() {
            return Err(Error::InvalidArgument("a GPU timer is already running on this device (one at a time)".into()));
        }
        self.submit_locked(&mut batch)?;
        batch.timer = Some(Timer::new(&self.device));
        Ok(true)
    }

    /// Waits for the work recorded since `start_gpu_timer` and returns how long the GPU took.
    /// None when no timer ran, no pass was recorded, or more passes ran than one timer can hold
    /// (`Timer::CAPACITY / 2`).
    pub fn stop_gpu_timer(self: &Arc<Device>) -> Result<Option<GpuTime>> {
        self.check_alive()?;
        let resolved = {
            let mut batch = self.batch.lock().unwrap();
            // Close the open pass so that its end timestamp is written before the resolve.
            batch.pass = None;
            let Some(timer) = batch.timer.take() else { return Ok(None) };
            if timer.used == 0 || timer.overflowed {
                return Ok(None);
            }
            let bytes = timer.used as u64 * wgpu::QUERY_SIZE as u64;
            let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kiln timer resolve"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
            enc.resolve_query_set(&timer.set, 0..timer.used, &buf, 0);
            (buf, bytes)
        };
        let (buf, bytes) = resolved;
        let mut raw = vec![0u8; bytes as usize];
        self.read(&buf, bytes, &mut raw)?;
        let ticks: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        Ok(summarize(&ticks, self.queue.get_timestamp_period() as f64))
    }
}
