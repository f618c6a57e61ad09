//! Q5_0, Q5_1 and the K formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against ggml's own C: the vectors in
//! tests/reference/kquant were written by ggml-quants.c's quantize_row_*_ref and
//! dequantize_row_* (make.sh there rebuilds them) over 18 awkward rows of 512 values: zeros,
//! ±0, constant rows, one-signed rows, 1e30 (f16 scales overflow), 6e4, subnormals, 1e-6
//! (subnormal f16 scales), spikes, a NaN, ±inf, per-sub-block magnitudes 2^-4..2^4, grid values
//! (rounding ties), sparse zeros, weight-like rows. Kiln's quantizer must give the same bytes
//! (NaN / inf included: ggml's x86-64 bytes), its host and GPU dequantizers the same f32 bits.
//!
//! The GPU products (matrix-vector for few rows of x, tiled for many) are checked against the
//! f64 reference over the same dequantized weights, with quant.rs's bound:
//! |got - want| <= (K + 2) 2^-24 Σ|x w| (+ f16's rounding of the result for f16 x).

mod common;
use common::*;
use kiln_core::ops::{self, QuantFormat, QuantFusion};
use kiln_core::reference::quant as cpu;
use kiln_core::{DType, Tensor};

const ROWS: usize = 18;
const COLS: usize = 512;
const NEW: [QuantFormat; 7] = [
    QuantFormat::Q5_0,
    QuantFormat::Q5_1,
    QuantFormat::Q2_K,
    QuantFormat::Q3_K,
    QuantFormat::Q4_K,
    QuantFormat::Q5_K,
    QuantFormat::Q6_K,
];
const K_FORMATS: [QuantFormat; 5] =
    [QuantFormat::Q2_K, QuantFormat::Q3_K, QuantFormat::Q4_K, QuantFormat::Q5_K, QuantFormat::Q6_K];

fn file(name: &str) -> Vec<u8> {
    let p = format!("{}/tests/reference/kquant/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn rows() -> Vec<f32> {
    let x = f32s(&file("rows.f32"));
    assert_eq!(x.len(), ROWS * COLS);
    x
}

fn bytes_of(t: &Tensor, nbytes: usize) -> Vec<u8> {
    let mut b = t.to_bytes().unwrap();
    assert!(b[nbytes..].iter().all(|&p| p == 0), "padding past {nbytes} bytes is not zero");
    b.truncate(nbytes);
    b
}

/// Same bits, or both NaN (a NaN's payload is not held).
#[track_caller]
fn assert_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{what}: value {i} (row {}, col {}): {g:e} ({:#x}) vs ggml's {w:e} ({:#x})",
            i / COLS,
            i % COLS,
            g.to_bits(),
            w.to_bits()
        );
    }
}

#[test]
fn host_quantize_is_byte_equal_to_ggml() {
    let x = rows();
    let mut bad = Vec::new();
    for f in NEW {
        let want = file(&format!("{}.q", f.name()));
        let rb = f.row_bytes(COLS).unwrap();
        assert_eq!(want.len(), ROWS * rb, "{f}");
        for r in 0..ROWS {
            if cpu::quantize(&x[r * COLS..(r + 1) * COLS], f) != want[r * rb..(r + 1) * rb] {
                bad.push(format!("{f} row {r}"));
            }
        }
    }
    assert!(bad.is_empty(), "bytes unlike ggml's: {bad:?}");
}

#[test]
fn host_dequantize_is_bit_equal_to_ggml() {
    for f in NEW {
        let q = file(&format!("{}.q", f.name()));
        let want = f32s(&file(&format!("{}.f32", f.name())));
        let mut got = vec![0.0f32; ROWS * COLS];
        ops::dequantize_host(&q, f, &mut got).unwrap();
        assert_bits(&format!("{f} dequantize_host"), &got, &want);
        let r: Vec<f32> = cpu::dequantize(&q, f, ROWS, COLS).into_iter().map(|v| v as f32).collect();
        assert_bits(&format!("{f} reference"), &r, &want);
    }
    // Lengths that are not whole blocks are refused.
    let mut out = [0.0f32; 32];
    assert!(ops::dequantize_host(&[0u8; 144], QuantFormat::Q4_K, &mut out).is_err());
    let mut out = [0.0f32; 256];
    assert!(ops::dequantize_host(&[0u8; 143], QuantFormat::Q4_K, &mut out).is_err());
}

#[test]
fn gpu_quantize_and_dequantize_equal_ggml() {
    poison();
    let x = rows();
    for f in NEW {
        let q = file(&format!("{}.q", f.name()));
        let want = f32s(&file(&format!("{}.f32", f.name())));
        let t = Tensor::from_slice(&x, &[ROWS, COLS]).unwrap();
        let qt = ops::quantize(&t, f).unwrap();
        assert_eq!(bytes_of(&qt, q.len()), q, "{f}: ops::quantize");
        let up = ops::quant_from_bytes(&kiln_core::device().unwrap(), &q, f, ROWS, COLS).unwrap();
        let got = ops::dequantize(&up, f, ROWS, COLS).unwrap().to_vec::<f32>().unwrap();
        assert_bits(&format!("{f} GPU dequantize"), &got, &want);
        // Embedding rows of the same table: the rows kernel with ids (out of range: zeros).
        let ids = [3i32, -1, 17, 18, 0, 12];
        let it = Tensor::from_slice(&ids, &[6]).unwrap();
        let got = ops::quant_embedding(&up, f, COLS, &it).unwrap().to_vec::<f32>().unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let g = &got[i * COLS..(i + 1) * COLS];
            if (0..ROWS as i32).contains(&id) {
                assert_bits(&format!("{f} embedding id {id}"), g, &want[id as usize * COLS..(id as usize + 1) * COLS]);
            } else {
                assert!(g.iter().all(|&v| v.to_bits() == 0), "{f}: id {id} gives zeros");
            }
        }
    }
}

/// Random weights of the finite kinds (the products compare sums, which NaN weights would
/// make NaN everywhere).
fn weights(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| match (i / cols) % 4 {
            0 => rng.uniform(-1.0, 1.0) as f32,
            1 => rng.uniform(0.1, 2.0) as f32,
            2 if (i / 16) % 3 == 0 => 0.0,
            _ => (rng.uniform(-1.0, 1.0) * 2f64.powi((i / 32 % 7) as i32 - 3)) as f32,
        })
        .collect()
}

#[track_caller]
fn check(what: &str, got: &[f64], want: &[f64], scale: &[f64], k: usize, dtype: DType) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let eps = (k as f64 + 2.0) * 2f64.powi(-24);
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let mut tol = eps * s;
        if dtype == DType::F16 {
            tol += 2f64.powi(-11) * w.abs() + 2f64.powi(-24);
        }
        assert!(g == w || (g - w).abs() <= tol, "{what}: element {i}: got {g}, reference {w} (tolerance {tol})");
    }
}

#[test]
fn quant_matmul_matches_reference() {
    poison();
    let mut rng = Rng::new(320);
    for f in NEW {
        let shapes: &[(usize, usize)] = if f.block_len() == 256 {
            &[(256, 1), (256, 65), (768, 7), (1280, 33)]
        } else {
            &[(32, 7), (96, 65), (544, 33)]
        };
        for &(k, n) in shapes {
            let w = weights(&mut rng, n, k);
            let wq = cpu::quantize(&w, f);
            let wt = ops::quant_from_bytes(&kiln_core::device().unwrap(), &wq, f, n, k).unwrap();
            for &m in &[1usize, 2, 5, 8, 9, 70] {
                for dt in float_dtypes() {
                    if dt == DType::F16 && m != 9 {
                        continue;
                    }
                    let (x, xv) = rand_tensor(&mut rng, &[m, k], dt, -2.0, 2.0);
                    let what = format!("{f} m={m} n={n} k={k} {dt}");
                    let y = ops::quant_matmul(&x, &wt, f, n).unwrap();
                    assert_eq!(y.shape(), &[m, n], "{what}");
                    let want = cpu::quant_matmul(&xv, m, k, &wq, f, n);
                    let scale = cpu::quant_matmul_abs(&xv, m, k, &wq, f, n);
                    check(&what, &y.to_f64_vec().unwrap(), &want, &scale, k, dt);
                }
            }
        }
    }
}

/// The decode matvec with its fusions (norm, SwiGLU, residual) over the K formats, and the
/// wide-kernel request falling back to the strided kernel for them.
#[test]
fn fused_matvec_matches_reference() {
    let mut rng = Rng::new(321);
    let (n, k) = (24usize, 512usize);
    for f in K_FORMATS {
        let w = weights(&mut rng, 2 * n, k);
        let wq = cpu::quantize(&w, f);
        let wt = ops::quant_from_bytes(&kiln_core::device().unwrap(), &wq, f, 2 * n, k).unwrap();
        let (x, xv) = rand_tensor(&mut rng, &[1, k], DType::F32, -2.0, 2.0);
        let (g, gv) = rand_tensor(&mut rng, &[k], DType::F32, 0.5, 1.5);
        let (r, rv) = rand_tensor(&mut rng, &[1, n], DType::F32, -1.0, 1.0);
        let fusion = QuantFusion { rms_norm: Some((&g, 1e-5)), swiglu: true, residual: Some(&r) };
        for kernel in [ops::MatvecKernel::Strided, ops::MatvecKernel::Wide] {
            let y = ops::quant_matmul_fused_kernel(&x, &wt, f, n, fusion, kernel).unwrap();
            let want = cpu::quant_matmul_fused(&xv, 1, k, &wq, f, n, Some((&gv, 1e-5)), true, Some(&rv));
            assert_close(&format!("{f} fused {kernel:?}"), &y.to_f64_vec().unwrap(), &want, 1e-4, 1e-4);
        }
    }
}

#[test]
fn k_shapes_are_checked() {
    let dev = kiln_core::device().unwrap();
    for f in K_FORMATS {
        // A row must be whole 256-value super-blocks.
        assert!(f.row_bytes(32).is_err());
        let t = Tensor::from_slice(&vec![0.5f32; 2 * 288], &[2, 288]).unwrap();
        assert!(ops::quantize(&t, f).is_err(), "{f}");
        assert!(ops::quant_from_bytes(&dev, &vec![0u8; f.block_bytes()], f, 1, 256).is_ok());
        assert!(ops::quant_from_bytes(&dev, &vec![0u8; f.block_bytes() - 2], f, 1, 256).is_err());
        let w = ops::quant_from_bytes(&dev, &vec![0u8; f.block_bytes()], f, 1, 256).unwrap();
        let x = Tensor::from_slice(&[1.0f32; 32], &[1, 32]).unwrap();
        assert!(ops::quant_matmul(&x, &w, f, 1).is_err(), "{f}: K = 32");
    }
}

/// The host dequantizer's Q4_0 / Q4_1 / Q8_0 path (its own code, not the reference's) against
/// the reference's independent decoder over random block bytes: every f16 scale pattern
/// (negative, subnormal, inf, NaN) and every code.
#[test]
fn dequantize_host_equals_the_reference_on_q4_0_q4_1_q8_0() {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for f in [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0] {
        let (rows, cols) = (64, 96);
        let bytes: Vec<u8> = (0..rows * cols / f.block_len() * f.block_bytes())
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect();
        let mut got = vec![0.0f32; rows * cols];
        ops::dequantize_host(&bytes, f, &mut got).unwrap();
        let want: Vec<f32> = cpu::dequantize(&bytes, f, rows, cols).into_iter().map(|v| v as f32).collect();
        assert_bits(&format!("{f} dequantize_host"), &got, &want);
    }
}
