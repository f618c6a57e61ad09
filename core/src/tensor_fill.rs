//! A tensor the host fills piece by piece, each piece written into its GPU buffer as it comes
//! (`queue.write_buffer` at its offset): a file streaming in (a page's download) reaches the GPU
//! without being gathered whole in host memory first. WebGPU writes whole 4-byte words at
//! 4-byte offsets; a piece's bytes outside its aligned middle wait on the host (at most 3 on
//! each side) until the word they share with a neighbouring piece is whole. Small pieces that
//! follow each other are joined on the host (up to 64 KiB) before they are written. The tensor is
//! handed out only by [`TensorFill::finish`], so nothing reads it while it is being written.

use crate::device::Device;
use crate::{DType, Error, Result, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

pub struct TensorFill {
    tensor: Tensor,
    /// Bytes the fill takes (the tensor's; its storage is this rounded up to a word).
    len: u64,
    /// Bytes written so far (each byte is written once).
    written: u64,
    /// Words some of whose bytes have come: (bytes, which of them have).
    partial: HashMap<u64, ([u8; 4], u8)>,
    /// Small pieces that follow each other, joined on the host before they are written (a
    /// stream of tiny chunks would otherwise cost a GPU write a word): (offset, bytes).
    run: (u64, Vec<u8>),
}

/// The most bytes `run` joins: small next to a download's chunks (64 KiB and up, written as
/// they come), large enough that 1-byte pieces cost one write per this many bytes.
const RUN_BYTES: usize = 64 << 10;

impl TensorFill {
    /// A `shape` tensor of `dtype` on `device`, its `len` bytes (at most the storage's) to be
    /// written with [`write`](Self::write); bytes of the storage past `len` are zero.
    pub fn new_on(device: &Arc<Device>, shape: &[usize], dtype: DType, len: u64) -> Result<TensorFill> {
        let tensor = Tensor::for_host_writes_on(device, shape, dtype)?;
        let storage = tensor.nbytes() as u64;
        if len > storage || storage - len >= 4 {
            return Err(Error::InvalidArgument(format!(
                "a fill of {len} bytes for a tensor of {storage} bytes (it must cover all but the last word's padding)"
            )));
        }
        Ok(TensorFill { tensor, len, written: 0, partial: HashMap::new(), run: (0, Vec::new()) })
    }

    /// Bytes `bytes` at byte `offset` of the tensor: the whole words among them written to the
    /// GPU now (a small piece: once the pieces after it are), the rest kept until their words
    /// are whole.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        if offset.checked_add(bytes.len() as u64).is_none_or(|e| e > self.len) {
            return Err(Error::InvalidArgument(format!(
                "bytes {offset}+{} written into a fill of {} bytes",
                bytes.len(),
                self.len
            )));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.written += bytes.len() as u64;
        let (run_at, run) = &mut self.run;
        if !run.is_empty() && *run_at + run.len() as u64 == offset && run.len() + bytes.len() <= RUN_BYTES {
            run.extend_from_slice(bytes);
            return Ok(());
        }
        self.flush_run()?;
        if bytes.len() >= RUN_BYTES {
            return self.write_now(offset, bytes);
        }
        self.run = (offset, bytes.to_vec());
        Ok(())
    }

    /// Writes the joined small pieces.
    fn flush_run(&mut self) -> Result<()> {
        let (at, run) = std::mem::take(&mut self.run);
        if run.is_empty() {
            return Ok(());
        }
        self.write_now(at, &run)
    }

    /// `bytes` at `offset` (within the fill: checked by `write`) to the GPU, but for the bytes
    /// of words not whole yet.
    fn write_now(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let end = offset + bytes.len() as u64;
        // The aligned middle [lo, hi) goes at once; the bytes before lo and from hi on wait.
        let lo = offset.next_multiple_of(4).min(end);
        let hi = (end / 4 * 4).max(lo);
        for o in (offset..lo).chain(hi..end) {
            self.keep_byte(o, bytes[(o - offset) as usize])?;
        }
        if hi > lo {
            let device = self.tensor.device.clone();
            device.upload_at(&self.tensor.buf, lo, &bytes[(lo - offset) as usize..(hi - offset) as usize])?;
        }
        Ok(())
    }

    /// One byte of a word not whole yet; the word is written once its four bytes have come.
    fn keep_byte(&mut self, o: u64, b: u8) -> Result<()> {
        let word = o / 4;
        let (bytes, have) = self.partial.entry(word).or_insert(([0; 4], 0));
        bytes[(o % 4) as usize] = b;
        *have |= 1 << (o % 4);
        // The bytes past `len` are the padding: never written, zero.
        let wanted = (0..4u64).filter(|i| word * 4 + i < self.len).fold(0u8, |m, i| m | 1 << i);
        if *have & wanted == wanted {
            let bytes = *bytes;
            self.partial.remove(&word);
            let device = self.tensor.device.clone();
            device.upload_at(&self.tensor.buf, word * 4, &bytes)?;
        }
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The tensor, once every byte has been written.
    pub fn finish(mut self) -> Result<Tensor> {
        self.flush_run()?;
        if self.written != self.len || !self.partial.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "a fill of {} bytes finished with {} written ({} words partly)",
                self.len,
                self.written,
                self.partial.len()
            )));
        }
        Ok(self.tensor)
    }
}
