//! The random generator of `ops::random` on the CPU, bit for bit: Philox-4x32-10 (Random123's
//! `philox4x32_R(10, ...)`) keyed by the seed, counter (e / 4, 0, 0, 0), word e % 4.

use crate::numeric::round_to;
pub use crate::numeric::uniform_params;
use crate::DType;
use half::f16;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// One Philox-4x32 block with 10 rounds.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for _ in 0..10 {
        let (h0, l0) = mulhilo(M0, c[0]);
        let (h1, l1) = mulhilo(M1, c[2]);
        c = [h1 ^ c[1] ^ k[0], l1, h0 ^ c[3] ^ k[1], l0];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// The 32 random bits behind element `e` of a tensor made with `seed`.
pub fn bits(seed: u64, e: usize) -> u32 {
    let block = philox4x32_10([(e / 4) as u32, 0, 0, 0], [seed as u32, (seed >> 32) as u32]);
    block[e % 4]
}

/// The first `n` words of the stream for `seed`.
pub fn stream(seed: u64, n: usize) -> Vec<u32> {
    let key = [seed as u32, (seed >> 32) as u32];
    let mut out = Vec::with_capacity(n);
    for t in 0..n.div_ceil(4) {
        let b = philox4x32_10([t as u32, 0, 0, 0], key);
        out.extend_from_slice(&b[..(n - 4 * t).min(4)]);
    }
    out
}

/// [0, 1) with 24 bits: exactly representable in f32.
pub fn unit(w: u32) -> f64 {
    (w >> 8) as f64 / (1u64 << 24) as f64
}

/// `random_uniform(shape, dtype, seed, low, high)` as f64 values, `n` elements; exact for f32.
pub fn uniform(n: usize, dtype: DType, seed: u64, low: f64, high: f64) -> Vec<f64> {
    let (lo, span, cap) = uniform_params(dtype, low, high);
    stream(seed, n)
        .into_iter()
        .map(|w| {
            // Two roundings, never fused (the kernel keeps them apart the same way).
            let v = (span * unit(w) as f32 + lo).min(cap);
            if dtype == DType::F16 {
                f16::from_f32(v).to_f64()
            } else {
                v as f64
            }
        })
        .collect()
}

/// The Box-Muller pair of two words, in f64: (r cos th, r sin th).
pub fn box_muller(w0: u32, w1: u32) -> (f64, f64) {
    let u1 = ((w0 >> 8) as f64 + 1.0) / (1u64 << 24) as f64;
    let th = 2.0 * std::f64::consts::PI * (unit(w1) - 0.5);
    let r = (-2.0 * u1.ln()).sqrt();
    (r * th.cos(), r * th.sin())
}

/// `random_normal(shape, dtype, seed, mean, std)` as f64 values (computed in f64 from the
/// same bits, then rounded to the dtype).
pub fn normal(n: usize, dtype: DType, seed: u64, mean: f64, std: f64) -> Vec<f64> {
    let words = stream(seed, n.next_multiple_of(2));
    let (m, s) = (mean as f32 as f64, std as f32 as f64);
    let mut out = Vec::with_capacity(n);
    for pair in words.chunks_exact(2) {
        let (z0, z1) = box_muller(pair[0], pair[1]);
        out.push(round_to(dtype, m + s * z0));
        out.push(round_to(dtype, m + s * z1));
    }
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Random123 tests/kat_vectors, the three philox4x32 10 lines (counter, key, expected).
    #[test]
    fn philox_known_answers() {
        let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            ([0; 4], [0; 2], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
            ([u32::MAX; 4], [u32::MAX; 2], [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (c, k, want) in kat {
            assert_eq!(philox4x32_10(c, k), want);
        }
    }
}
