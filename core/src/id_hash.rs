//! The hasher of the per-dispatch lookups.

use std::hash::Hasher;

/// A multiply-rotate hash (as rustc's FxHasher) for the lookups every dispatch makes (the
/// bind-group cache's wgpu ids, the pipeline cache's kernel keys), instead of SipHash: its
/// flood resistance is not needed where the keys are wgpu's ids and built-in kernels' names
/// (a user kernel's key is a hash of its source plus its entry point's name, and
/// their entries are bounded, `KILN_PIPELINE_CACHE_ENTRIES`).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
