mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::matmul as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

/// Tolerance for a product with inner dimension k of values in [-1, 1].
fn mm_tol(dt: DType, k: usize) -> (f64, f64) {
    match dt {
        DType::F32 => (1e-6 * (k as f64 + 1.0), 1e-5),
        DType::F16 => (1e-3 + 2e-5 * k as f64, 2e-3),
        _ => (0.0, 0.0),
    }
}

fn check(rng: &mut Rng, sa: &[usize], sb: &[usize], dt: DType) {
    let (lo, hi) = if dt.is_float() {
        (-1.0, 1.0)
    } else if dt == DType::U32 {
        (0.0, 9.0)
    } else {
        (-9.0, 9.0)
    };
    let (a, av) = rand_tensor(rng, sa, dt, lo, hi);
    let (b, bv) = rand_tensor(rng, sb, dt, lo, hi);
    let c = ops::matmul(&a, &b).unwrap_or_else(|e| panic!("matmul {sa:?} x {sb:?} {dt}: {e}"));
    let (want, shape) = cpu::matmul(&av, sa, &bv, sb).unwrap();
    assert_eq!(c.shape(), &shape[..], "{sa:?} x {sb:?}");
    assert_eq!(c.dtype(), dt);
    let k = if sa.len() == 1 { sa[0] } else { sa[sa.len() - 1] };
    let (atol, rtol) = mm_tol(dt, k);
    assert_close(&format!("matmul {sa:?} x {sb:?} {dt}"), &c.to_f64_vec().unwrap(), &want, atol, rtol);
}

#[test]
fn matmul_2d_awkward_sizes_f32() {
    poison();
    let mut rng = Rng::new(11);
    let sizes = [0usize, 1, 7, 64, 65, 129];
    for &m in &sizes {
        for &n in &sizes {
            for &k in &sizes {
                check(&mut rng, &[m, k], &[k, n], DType::F32);
            }
        }
    }
}

#[test]
fn matmul_2d_awkward_sizes_f16() {
    if !has_f16() {
        eprintln!("adapter has no f16: skipped");
        return;
    }
    poison();
    let mut rng = Rng::new(12);
    let sizes = [0usize, 1, 7, 65, 129];
    for &m in &sizes {
        for &n in &sizes {
            for &k in &[0usize, 1, 64, 129] {
                check(&mut rng, &[m, k], &[k, n], DType::F16);
            }
        }
    }
}

#[test]
fn matmul_batched_broadcast_and_vectors() {
    poison();
    let mut rng = Rng::new(13);
    let cases: &[(&[usize], &[usize])] = &[
        (&[2, 1, 5, 3], &[4, 3, 6]),
        (&[1, 5, 3], &[2, 3, 4]),
        (&[3, 1, 7, 9], &[1, 2, 9, 65]),
        (&[3, 5, 4], &[4, 6]), // batched A, one B: folded into one tall product
        (&[2, 3, 5, 4], &[4]), // batched matrix-vector
        (&[4], &[3, 4, 6]),    // vector-matrix, batched
        (&[65, 70], &[70]),    // matrix-vector
        (&[70], &[70, 33]),    // vector-matrix
        (&[7], &[7]),          // vector-vector: rank 0
        (&[1], &[1, 1]),
        (&[0, 3, 4], &[4, 2]),       // empty batch
        (&[2, 0, 3, 4], &[1, 4, 5]), // empty broadcast batch
        (&[2, 3, 0], &[0, 5]),       // K = 0: zeros
        (&[0], &[0]),                // empty vectors: 0.0
        (&[1, 1, 1, 1, 1, 2, 3], &[2, 3, 1]),
    ];
    for dt in float_dtypes().into_iter().chain([DType::I32, DType::U32]) {
        for (sa, sb) in cases {
            check(&mut rng, sa, sb, dt);
        }
    }
}

#[test]
fn matmul_rank0_and_empty_results() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3]).unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    assert_eq!(c.shape(), &[] as &[usize]);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![32.0]);
    let z = ops::matmul(
        &Tensor::from_slice::<f32>(&[], &[2, 0]).unwrap(),
        &Tensor::from_slice::<f32>(&[], &[0, 3]).unwrap(),
    )
    .unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
}

#[test]
fn matmul_integers_wrap() {
    poison();
    let big = [i32::MAX, 3, -7, i32::MIN + 5, 123_456_789, 99_999];
    let a = Tensor::from_slice(&big, &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[3i32, -2, 7, 11, 65_537, -9], &[3, 2]).unwrap();
    let got = ops::matmul(&a, &b).unwrap().to_vec::<i32>().unwrap();
    let bv = [3i32, -2, 7, 11, 65_537, -9];
    let mut want = vec![0i32; 4];
    for i in 0..2 {
        for j in 0..2 {
            for l in 0..3 {
                want[i * 2 + j] = want[i * 2 + j].wrapping_add(big[i * 3 + l].wrapping_mul(bv[l * 2 + j]));
            }
        }
    }
    assert_eq!(got, want);
    let ua: Vec<u32> = big.iter().map(|&v| v as u32).collect();
    let ub: Vec<u32> = bv.iter().map(|&v| v as u32).collect();
    let got = ops::matmul(&Tensor::from_slice(&ua, &[2, 3]).unwrap(), &Tensor::from_slice(&ub, &[3, 2]).unwrap())
        .unwrap()
        .to_vec::<u32>()
        .unwrap();
    let want: Vec<u32> = want.iter().map(|&v| v as u32).collect();
    assert_eq!(got, want);
}

#[test]
fn matmul_errors() {
    let a = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[0.0f32; 8], &[4, 2]).unwrap();
    assert_eq!(ops::matmul(&a, &b).unwrap_err().code(), ErrorCode::ShapeMismatch);
    let v = Tensor::from_slice(&[0.0f32; 2], &[2]).unwrap();
    assert_eq!(ops::matmul(&a, &v).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::matmul(&v, &a.reshape(&[3, 2]).unwrap().reshape(&[2, 3]).unwrap()).unwrap().shape(), &[3]);
    let s = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(ops::matmul(&s, &a).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::matmul(&a, &s).unwrap_err().code(), ErrorCode::ShapeMismatch);
    let bi = Tensor::from_slice(&[0i32; 6], &[3, 2]).unwrap();
    assert_eq!(ops::matmul(&a, &bi).unwrap_err().code(), ErrorCode::DTypeMismatch);
    let x = Tensor::from_slice(&[0.0f32; 2 * 2 * 3], &[2, 2, 3]).unwrap();
    let y = Tensor::from_slice(&[0.0f32; 3 * 3 * 2], &[3, 3, 2]).unwrap();
    assert_eq!(ops::matmul(&x, &y).unwrap_err().code(), ErrorCode::ShapeMismatch);
}

#[test]
fn matmul_is_deterministic() {
    let mut rng = Rng::new(14);
    let (a, _) = rand_tensor(&mut rng, &[2, 129, 65], DType::F32, -1.0, 1.0);
    let (b, _) = rand_tensor(&mut rng, &[65, 131], DType::F32, -1.0, 1.0);
    let first = ops::matmul(&a, &b).unwrap().to_bytes().unwrap();
    for _ in 0..3 {
        assert_eq!(ops::matmul(&a, &b).unwrap().to_bytes().unwrap(), first);
    }
}

#[test]
fn matmul_more_than_65535_workgroups() {
    // A vector times 70 000 small matrices: one workgroup per batch entry, more than the
    // per-dimension dispatch limit of 65 535.
    poison();
    let mut rng = Rng::new(15);
    let max = kiln_core::device().unwrap().limits().max_compute_workgroups_per_dimension as usize;
    let batch = max + 4465;
    check(&mut rng, &[3], &[batch, 3, 2], DType::F32);
    check(&mut rng, &[batch, 1, 2], &[batch, 2, 1], DType::F32);
}

#[test]
fn matmul_every_tiling() {
    // pick_tiles only takes LARGE for big products: run every tiling on awkward shapes here.
    poison();
    let mut rng = Rng::new(16);
    let extra = kiln_core::ops::MatmulTiles { bm: 8, bn: 12, bk: 5, tm: 8, tn: 4 };
    for tiles in kiln_core::ops::MatmulTiles::ALL.into_iter().chain([extra]) {
        for (sa, sb) in [
            (&[131usize, 37][..], &[37usize, 133][..]),
            (&[2, 1, 5, 3], &[4, 3, 6]),
            (&[7, 16], &[16]),
            (&[1, 0], &[0, 3]),
        ] {
            let (a, av) = rand_tensor(&mut rng, sa, DType::F32, -1.0, 1.0);
            let (b, bv) = rand_tensor(&mut rng, sb, DType::F32, -1.0, 1.0);
            let c = ops::matmul_with_tiles(&a, &b, tiles).unwrap();
            let (want, shape) = cpu::matmul(&av, sa, &bv, sb).unwrap();
            assert_eq!(c.shape(), &shape[..]);
            assert_close(&format!("{tiles:?} {sa:?} x {sb:?}"), &c.to_f64_vec().unwrap(), &want, 1e-4, 1e-5);
        }
    }
    let a = Tensor::from_slice(&[0.0f32; 4], &[2, 2]).unwrap();
    let bad = kiln_core::ops::MatmulTiles { bm: 8, bn: 8, bk: 8, tm: 3, tn: 4 };
    assert_eq!(ops::matmul_with_tiles(&a, &a, bad).unwrap_err().code(), ErrorCode::InvalidArgument);
    let huge = kiln_core::ops::MatmulTiles { bm: 4096, bn: 4096, bk: 64, tm: 4, tn: 4 };
    assert_eq!(ops::matmul_with_tiles(&a, &a, huge).unwrap_err().code(), ErrorCode::InvalidArgument);
}

/// Every staging of the tiled kernel (scalar or 4x4-transposed A stores, one or two tile
/// copies) with every tiling: ragged shapes (K and N multiples of 4 or not, so the vec4 and
/// scalar loaders both run), several K steps, broadcast batches, K = 0, and special values.
#[test]
fn matmul_every_staging() {
    use kiln_core::ops::{MatmulKernel, MatmulTiles};
    poison();
    let mut rng = Rng::new(18);
    let extra = MatmulTiles { bm: 8, bn: 12, bk: 5, tm: 8, tn: 4 };
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[131, 36], &[36, 132]),
        (&[67, 53], &[53, 29]),
        (&[2, 1, 9, 40], &[3, 40, 8]),
        (&[3, 0], &[0, 8]),
        (&[130, 68], &[68, 4]),
        (&[5, 200], &[200, 132]),
    ];
    for tiles in MatmulTiles::ALL.into_iter().chain([extra]) {
        for kernel in MatmulKernel::ALL {
            for (sa, sb) in shapes {
                let (a, av) = rand_tensor(&mut rng, sa, DType::F32, -1.0, 1.0);
                let (b, bv) = rand_tensor(&mut rng, sb, DType::F32, -1.0, 1.0);
                let c = ops::matmul_with_kernel(&a, &b, tiles, kernel).unwrap();
                let (want, shape) = cpu::matmul(&av, sa, &bv, sb).unwrap();
                assert_eq!(c.shape(), &shape[..]);
                let what = format!("{tiles:?} {kernel:?} {sa:?} x {sb:?}");
                assert_close(&what, &c.to_f64_vec().unwrap(), &want, 1e-4, 1e-5);
            }
        }
    }
    // NaN and inf in A reach exactly their row of C, in B their column.
    let (m, k, n) = (70, 36, 68);
    let (_, mut av) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
    let (_, mut bv) = rand_tensor(&mut rng, &[k, n], DType::F32, -1.0, 1.0);
    av[5 * k + 7] = f64::NAN;
    av[66 * k + 35] = f64::INFINITY;
    bv[3 * n + 67] = f64::NEG_INFINITY;
    bv[20 * n] = 3.0e38;
    let up = |v: &[f64], s: &[usize]| {
        Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F32, v), s, DType::F32).unwrap()
    };
    let (a, b) = (up(&av, &[m, k]), up(&bv, &[k, n]));
    let (want, _) = cpu::matmul(&av, &[m, k], &bv, &[k, n]).unwrap();
    let want: Vec<f64> =
        want.iter().map(|&w| if w.abs() > f32::MAX as f64 { w.signum() * f64::INFINITY } else { w }).collect();
    for tiles in [MatmulTiles::HUGE, MatmulTiles::LARGE, MatmulTiles::MEDIUM, MatmulTiles::SMALL] {
        for kernel in MatmulKernel::ALL {
            let got = ops::matmul_with_kernel(&a, &b, tiles, kernel).unwrap().to_f64_vec().unwrap();
            assert_close(&format!("special {tiles:?} {kernel:?}"), &got, &want, 1e-4, 1e-5);
        }
    }
}

/// A timing run for a real GPU (`cargo test --release --test matmul -- --ignored --nocapture`):
/// 4096³ f32 with each large tiling, checked on sampled entries.
#[test]
#[ignore]
fn matmul_bench_4096() {
    use kiln_core::ops::MatmulTiles;
    let n: usize = std::env::var("KILN_BENCH_N").ok().and_then(|s| s.parse().ok()).unwrap_or(4096);
    let dev = kiln_core::device().unwrap();
    eprintln!("device: {} ({})", dev.info().name, dev.info().backend);
    let mut rng = Rng::new(17);
    let (a, av) = rand_tensor(&mut rng, &[n, n], DType::F32, -1.0, 1.0);
    let (b, bv) = rand_tensor(&mut rng, &[n, n], DType::F32, -1.0, 1.0);
    let mut configs = vec![MatmulTiles::LARGE, MatmulTiles::HUGE, MatmulTiles::MEDIUM];
    for s in std::env::var("KILN_BENCH_TILES").unwrap_or_default().split(';').filter(|s| !s.is_empty()) {
        let v: Vec<u32> = s.split(',').map(|x| x.parse().unwrap()).collect();
        configs.push(MatmulTiles { bm: v[0], bn: v[1], bk: v[2], tm: v[3], tn: v[4] });
    }
    for t in configs {
        let c = match ops::matmul_with_tiles(&a, &b, t) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{t:?}: {e}");
                continue;
            }
        };
        let got = c.to_vec::<f32>().unwrap();
        for s in 0..64 {
            let (i, j) = ((s * 977) % n, (s * 1913 + 5) % n);
            let want: f64 = (0..n).map(|l| av[i * n + l] * bv[l * n + j]).sum();
            assert!(
                (got[i * n + j] as f64 - want).abs() < 1e-3 * (n as f64).sqrt(),
                "{t:?} ({i},{j}): {} vs {want}",
                got[i * n + j]
            );
        }
        let reps = 10;
        let start = std::time::Instant::now();
        let mut outs = Vec::new();
        for _ in 0..reps {
            outs.push(ops::matmul_with_tiles(&a, &b, t).unwrap());
        }
        kiln_core::synchronize().unwrap();
        let secs = start.elapsed().as_secs_f64() / reps as f64;
        eprintln!("{t:?}: {:.3} ms, {:.2} TFLOP/s", secs * 1e3, 2.0 * (n as f64).powi(3) / secs / 1e12);
    }
}

/// f16 through cooperative matrices where the device has them (e.g. NVIDIA through Vulkan's
/// VK_KHR_cooperative_matrix), else through the tiled kernel (lavapipe): either way checked
/// against the f64 reference on ragged shapes, batches and both tilings of the coop kernel.
/// With f32 accumulation (f16 x f16 -> f32 configurations) the tolerance is the usual f16 one;
/// hardware with only f16 accumulators rounds every partial sum to f16, so the error grows like
/// k * 2^-11 * |partial sums| and the tolerance is loosened accordingly.
#[test]
fn matmul_f16_cooperative_or_fallback() {
    if !has_f16() {
        eprintln!("adapter has no f16: skipped");
        return;
    }
    use kiln_core::ops::matmul::{coop_accumulator, uses_cooperative_matrix};
    let dev = kiln_core::device().unwrap();
    let acc = coop_accumulator(&dev);
    eprintln!(
        "device {}: cooperative matrix {}, f16 accumulator {acc:?}",
        dev.info().name,
        dev.has_cooperative_matrix()
    );
    if !dev.has_cooperative_matrix() {
        assert_eq!(acc, None);
    }
    poison();
    let mut rng = Rng::new(18);
    let cases: &[(&[usize], &[usize])] = &[
        (&[16, 16], &[16, 16]),
        (&[17, 31], &[31, 19]),
        (&[64, 64], &[64, 64]),
        (&[65, 129], &[129, 67]),
        (&[130, 33], &[33, 131]),
        (&[2, 1, 37, 48], &[3, 48, 20]), // broadcast batch
        (&[3, 40, 24], &[24, 18]),       // batched A, one B: one tall product
        (&[520, 70], &[70, 516]),        // the large coop tiling, ragged edges
        (&[96, 48], &[48, 80]),          // multiples of 16 (the direct staging), tiles past M and N
        (&[2, 144, 32], &[2, 32, 48]),   // batched, multiples of 16
        (&[528, 64], &[64, 544]),        // the large tiling, multiples of 16, tiles past M and N
        (&[15, 64], &[64, 64]),          // below one tile: always the tiled kernel
        (&[64, 8], &[8, 64]),
    ];
    for (sa, sb) in cases {
        let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
        let coop = uses_cooperative_matrix(&dev, m, n, k) || uses_cooperative_matrix(&dev, m * sa[0], n, k);
        if acc.is_none() {
            assert!(!coop, "{sa:?} x {sb:?}: the coop path without cooperative matrices");
        } else if m >= 16 && n >= 16 && k >= 16 {
            assert!(coop, "{sa:?} x {sb:?}: the tiled kernel on a device with cooperative matrices");
        }
        let (a, av) = rand_tensor(&mut rng, sa, DType::F16, -1.0, 1.0);
        let (b, bv) = rand_tensor(&mut rng, sb, DType::F16, -1.0, 1.0);
        let c = ops::matmul(&a, &b).unwrap_or_else(|e| panic!("matmul {sa:?} x {sb:?} f16: {e}"));
        let (want, shape) = cpu::matmul(&av, sa, &bv, sb).unwrap();
        assert_eq!(c.shape(), &shape[..]);
        let (atol, rtol) = match (coop, acc) {
            (true, Some("f16")) => (2e-3 + 1e-3 * k as f64, 1e-2),
            _ => mm_tol(DType::F16, k),
        };
        assert_close(
            &format!("matmul {sa:?} x {sb:?} f16 (coop: {coop})"),
            &c.to_f64_vec().unwrap(),
            &want,
            atol,
            rtol,
        );
    }
}

/// The cooperative-matrix kernel's WGSL goes through naga (parse, validate, SPIR-V) on every
/// machine, so a template error shows here even where no device can run it.
#[test]
fn matmul_coop_kernel_validates() {
    for acc in ["f32", "f16"] {
        for sg in [32, 64] {
            for large in [false, true] {
                // Halves per global read of A and B, and whether 4-wide ones stay vec4 in the tiles.
                for (wa, wb, vt) in [
                    (1, 1, false),
                    (4, 4, false),
                    (4, 1, true),
                    (1, 4, true),
                    (4, 4, true),
                    (8, 8, false),
                    (8, 4, true),
                    (1, 8, false),
                ] {
                    let src = kiln_core::ops::matmul::coop_source_for_tests(acc, sg, large, wa, wb, vt);
                    let what = format!("acc {acc}, subgroup {sg}, large {large}, widths {wa}/{wb}, vec4 tiles {vt}");
                    assert_wgsl_compiles(&what, &src);
                }
            }
        }
    }
}
