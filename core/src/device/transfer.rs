//! Host <-> GPU copies: uploads in pieces, readback through pooled staging buffers.

use super::{Device, GpuBuffer};
use crate::pool::size_class;
use crate::Result;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

/// A staging buffer holding a copy on its way to the host.
pub(super) struct Staging {
    pub(super) buffer: wgpu::Buffer,
    pub(super) padded: u64,
    pub(super) class: u64,
    pub(super) bytes: u64,
}

pub(super) const STAGING_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);

impl Device {
    /// Host bytes into a buffer. Runs before any later-recorded GPU work (see `Pool`).
    pub(crate) fn upload(&self, buf: &GpuBuffer, data: &[u8]) -> Result<()> {
        self.check_alive()?;
        crate::device::capture::refuse(self, "an upload");
        if data.is_empty() {
            return Ok(());
        }
        let _upload = crate::startup::span("upload (host bytes into wgpu's staging)");
        // In pieces: wgpu stages each write in its own host-visible allocation, and pieces of this
        // size come from its pooled memory blocks instead of a fresh mapping (and page faults)
        // the size of the whole tensor.
        // Big uploads spread the pieces over a few threads: one thread's copy into
        // write-combined staging memory tops out well below the bus.
        const PIECE: usize = 8 << 20;
        const THREADS: usize = crate::platform::COPY_THREADS;
        let whole = data.len() / 4 * 4;
        let pieces: Vec<usize> = (0..whole).step_by(PIECE).collect();
        let write = |start: usize| {
            let end = (start + PIECE).min(whole);
            self.queue.write_buffer(buf.raw(), start as u64, &data[start..end]);
        };
        if THREADS == 1 || pieces.len() < 2 * THREADS {
            pieces.iter().for_each(|&p| write(p));
        } else {
            std::thread::scope(|scope| {
                for share in pieces.chunks(pieces.len().div_ceil(THREADS)) {
                    scope.spawn(|| share.iter().for_each(|&p| write(p)));
                }
            });
        }
        if whole < data.len() {
            let mut tail = data[whole..].to_vec();
            tail.resize(4, 0);
            self.queue.write_buffer(buf.raw(), whole as u64, &tail);
        }
        Ok(())
    }

    /// Host bytes into a buffer at byte `offset`: whole words at a word's offset (WebGPU's
    /// `writeBuffer` rule; `TensorFill` keeps the bytes of words not whole yet). Runs before any
    /// later-recorded GPU work, as `upload`.
    pub(crate) fn upload_at(&self, buf: &GpuBuffer, offset: u64, data: &[u8]) -> Result<()> {
        self.check_alive()?;
        crate::device::capture::refuse(self, "an upload");
        let end = offset.checked_add(data.len() as u64);
        if !offset.is_multiple_of(4) || !data.len().is_multiple_of(4) || end.is_none_or(|e| e > buf.raw().size()) {
            return Err(crate::Error::Internal(format!(
                "a write of {} bytes at {offset} into a buffer of {} bytes (whole words within it only)",
                data.len(),
                buf.raw().size()
            )));
        }
        const PIECE: usize = 8 << 20;
        for (i, piece) in data.chunks(PIECE).enumerate() {
            self.queue.write_buffer(buf.raw(), offset + (i * PIECE) as u64, piece);
        }
        Ok(())
    }

    /// Host bool bytes into a buffer of u32 words, 0 or 1 each (any nonzero byte is true). Each
    /// piece is widened on its own and written at once, spread over threads as `upload`: no
    /// word copy of the whole tensor is ever made.
    pub(crate) fn upload_bools(&self, buf: &GpuBuffer, bools: &[u8]) -> Result<()> {
        crate::device::capture::refuse(self, "an upload");
        self.check_alive()?;
        const PIECE: usize = 2 << 20;
        const THREADS: usize = crate::platform::COPY_THREADS;
        let write = |start: usize| {
            let end = (start + PIECE).min(bools.len());
            let words = crate::dtype::bools_to_words(&bools[start..end]);
            self.queue.write_buffer(buf.raw(), 4 * start as u64, bytemuck::cast_slice(&words));
        };
        let pieces: Vec<usize> = (0..bools.len()).step_by(PIECE).collect();
        if THREADS == 1 || pieces.len() < 2 * THREADS {
            pieces.iter().for_each(|&p| write(p));
        } else {
            std::thread::scope(|scope| {
                for share in pieces.chunks(pieces.len().div_ceil(THREADS)) {
                    scope.spawn(|| share.iter().for_each(|&p| write(p)));
                }
            });
        }
        Ok(())
    }

    /// Reads `out.len()` bool words of `src` back as bytes, 0 or 1 each, narrowed straight out of
    /// the staging buffer.
    pub(crate) fn read_bools(self: &Arc<Device>, src: &wgpu::Buffer, out: &mut [u8]) -> Result<()> {
        self.read_with(src, 4 * out.len() as u64, |view| {
            const THREADS: usize = crate::platform::COPY_THREADS;
            // Mapped ranges are at least 8-byte aligned (wgpu's MAP_ALIGNMENT); the fallback only
            // keeps a misaligned mapping from being a panic.
            let Ok(words) = bytemuck::try_cast_slice::<u8, u32>(view) else {
                for (o, w) in out.iter_mut().zip(view.chunks_exact(4)) {
                    *o = (w != [0, 0, 0, 0]) as u8;
                }
                return;
            };
            if THREADS == 1 || out.len() < 4 << 20 {
                crate::dtype::words_to_bools(words, out);
                return;
            }
            let share = out.len().div_ceil(THREADS);
            std::thread::scope(|scope| {
                for (o, w) in out.chunks_mut(share).zip(words.chunks(share)) {
                    scope.spawn(move || crate::dtype::words_to_bools(w, o));
                }
            });
        })
    }

    /// Copies `bytes` bytes of `src` back to the host (submits the batch first).
    pub(crate) fn read(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, out: &mut [u8]) -> Result<()> {
        self.read_with(src, bytes, |view| copy_parallel(&mut out[..bytes as usize], view))
    }

    /// Maps `bytes` bytes of `src` (submitting the batch first) and hands them to `take`.
    fn read_with(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, take: impl FnOnce(&[u8])) -> Result<()> {
        self.read_counted(src, bytes, take).map_err(crate::stats::counters::count_error)
    }

    fn read_counted(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, take: impl FnOnce(&[u8])) -> Result<()> {
        let _read = crate::startup::span("readback");
        let Some(staging) = self.begin_read(src, bytes)? else { return Ok(()) };
        let (tx, rx) = mpsc::channel();
        staging.buffer.slice(..staging.padded).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let mapped = self.wait(rx)?;
        self.finish_read(staging, mapped, take)?;
        self.settle_times()
    }

    /// `read`, awaited: the browser's only way (the page cannot block while the GPU answers).
    #[cfg(target_arch = "wasm32")]
    pub(crate) async fn read_async(self: &Arc<Device>, src: &wgpu::Buffer, bytes: u64, out: &mut [u8]) -> Result<()> {
        let Some(staging) = self.begin_read(src, bytes)? else { return Ok(()) };
        let (tx, rx) = crate::platform::oneshot();
        staging.buffer.slice(..staging.padded).map_async(wgpu::MapMode::Read, move |r| tx.send(r));
        let mapped = rx.await;
        crate::platform::settle_scopes().await?;
        self.check_alive()?;
        let mapped = mapped.ok_or_else(|| self.fault("the GPU callback was dropped".into()))?;
        self.finish_read(staging, mapped, |view| copy_parallel(&mut out[..bytes as usize], view))
    }

    /// Records the copy of `src` into a staging buffer and submits it; None for zero bytes.
    pub(super) fn begin_read(&self, src: &wgpu::Buffer, bytes: u64) -> Result<Option<Staging>> {
        self.check_alive()?;
        if bytes == 0 {
            return Ok(None);
        }
        let padded = bytes.next_multiple_of(4);
        let class = size_class(padded);
        let staging = match self.pool.take(class, STAGING_USAGE) {
            Some(b) => b,
            None => {
                self.mem.allocated.fetch_add(class, Ordering::Relaxed);
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("kiln staging"),
                    size: class,
                    usage: STAGING_USAGE,
                    mapped_at_creation: false,
                })
            }
        };
        {
            let mut batch = self.batch.lock().unwrap();
            if let Err(e) = self.check_not_revoked([src]) {
                drop(batch);
                let destroyed = self.pool.release_idle(class, STAGING_USAGE, staging);
                self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
                return Err(e);
            }
            batch.pass = None;
            let enc = batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()));
            enc.copy_buffer_to_buffer(src, 0, &staging, 0, padded);
            self.submit_locked(&mut batch)?;
        }
        Ok(Some(Staging { buffer: staging, padded, class, bytes }))
    }

    /// Copies the mapped staging buffer into `out` and gives the buffer back to the pool.
    pub(super) fn finish_read(
        &self,
        staging: Staging,
        mapped: std::result::Result<(), wgpu::BufferAsyncError>,
        take: impl FnOnce(&[u8]),
    ) -> Result<()> {
        let Staging { buffer: staging, padded, class, bytes } = staging;
        mapped.map_err(|e| self.fault(format!("mapping the staging buffer failed: {e}")))?;
        {
            let view = staging
                .slice(..padded)
                .get_mapped_range()
                .map_err(|e| self.fault(format!("reading the staging buffer failed: {e}")))?;
            take(&view[..bytes as usize]);
        }
        staging.unmap();
        let destroyed = self.pool.release_idle(class, STAGING_USAGE, staging);
        self.mem.allocated.fetch_sub(destroyed, Ordering::Relaxed);
        self.take_uncaptured()
    }
}

/// `dst.copy_from_slice(src)`, by up to four threads for big copies: one thread's copy out of
/// mapped staging memory (and into freshly faulted pages) tops out far below the bus.
fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    const PIECE: usize = 8 << 20;
    const THREADS: usize = crate::platform::COPY_THREADS;
    if THREADS == 1 || dst.len() < 2 * THREADS * PIECE {
        dst.copy_from_slice(src);
        return;
    }
    let share = dst.len().div_ceil(THREADS);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(share).zip(src.chunks(share)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}
