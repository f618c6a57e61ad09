//! Long loops inside one invocation on lavapipe: llvmpipe's loop limiter stops an invocation's
//! loops after 65535 passes in all (core/src/loop_budget.rs), so every op whose per-invocation
//! loop grows with an input dimension is run here past that, against a CPU reference. Sizes
//! are big in the one dimension and tiny in the others, to keep the suite fast.
mod common;
use common::*;
use kiln_core::dtype::f64_to_bytes;
use kiln_core::ops::{self, MatmulKernel, MatmulTiles};
use kiln_core::{DType, Tensor};

fn f32_tensor(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_bytes(bytemuck::cast_slice(v), shape, DType::F32).unwrap()
}

/// `a` [m, k] times `b` [k, n] of random values through `run`, against the f64 reference.
fn check_long(what: &str, rng: &mut Rng, m: usize, k: usize, n: usize, run: impl Fn(&Tensor, &Tensor) -> Tensor) {
    let (a, av) = rand_tensor(rng, &[m, k], DType::F32, -1.0, 1.0);
    let (b, bv) = rand_tensor(rng, &[k, n], DType::F32, -1.0, 1.0);
    let (want, _) = kiln_core::reference::matmul::matmul(&av, &[m, k], &bv, &[k, n]).unwrap();
    let got = run(&a, &b).to_f64_vec().unwrap();
    // f32 rounding of K terms in [-1, 1] drifts ~1e-3 at K = 70000; terms cut off by the
    // limiter would be off by ~sqrt(K) / 3 (~90).
    assert_close(&format!("{what} {m}x{k}x{n}"), &got, &want, 1e-5 * k as f64, 0.0);
}

#[test]
fn matmul_of_a_long_k_sums_every_term() {
    // ones(1, K) @ ones(K, 1): lavapipe gave 10689 for K = 70000 and 7169 for K = 65535 before.
    for k in [65535usize, 70000] {
        let a = f32_tensor(&vec![1.0; k], &[1, k]);
        let b = f32_tensor(&vec![1.0; k], &[k, 1]);
        let c = ops::matmul(&a, &b).unwrap().to_f64_vec().unwrap();
        assert_eq!(c, vec![k as f64], "ones(1, {k}) @ ones({k}, 1)");
    }
    let mut rng = Rng::new(7);
    // Scalar and vec4 loads of A (K odd, K a multiple of 4); the one-thread, column and row
    // tilings.
    for (m, k, n) in [(1, 70001, 1), (2, 70000, 3), (6, 40000, 2), (2, 40000, 6)] {
        check_long("matmul", &mut rng, m, k, n, |a, b| ops::matmul(a, b).unwrap());
    }
    // vector @ vector (rank 0).
    let k = 70003;
    let (a, av) = rand_tensor(&mut rng, &[k], DType::F32, -1.0, 1.0);
    let (b, bv) = rand_tensor(&mut rng, &[k], DType::F32, -1.0, 1.0);
    let d = ops::matmul(&a, &b).unwrap();
    assert_eq!(d.shape(), &[] as &[usize]);
    let want: f64 = av.iter().zip(&bv).map(|(x, y)| x * y).sum();
    assert_close("vector @ vector", &d.to_f64_vec().unwrap(), &[want], 0.01, 0.0);
    let t = ops::tensordot(&a, &b, &ops::TensordotAxes::Count(1)).unwrap();
    assert_close("tensordot of two vectors", &t.to_f64_vec().unwrap(), &[want], 0.01, 0.0);
}

#[test]
fn matmul_long_k_every_staging() {
    // SMALL's 64 threads with single and double staging, scalar and quad A stores.
    let mut rng = Rng::new(8);
    for kernel in MatmulKernel::ALL {
        check_long(&format!("{kernel:?}"), &mut rng, 1, 100000, 1, |a, b| {
            ops::matmul_with_kernel(a, b, MatmulTiles::SMALL, kernel).unwrap()
        });
    }
}

#[test]
fn matmul_split_k_keeps_the_bits() {
    // What a CPU adapter does past the limiter, forced at a small K on any adapter, against one
    // dispatch: SMALL with every staging (single and double, scalar and quad A stores), a tile
    // with HUGE's unrolled k steps and 8 x 8 registers, and TINY; K a multiple of 4 and odd (vec4 and
    // scalar loads of A); dispatches of 1 and 3 K steps. (Every tiling and staging costs
    // lavapipe ~18 s of compiling without its shader cache.)
    let mut rng = Rng::new(10);
    let mut cases: Vec<(MatmulTiles, MatmulKernel)> =
        MatmulKernel::ALL.iter().map(|&k| (MatmulTiles::SMALL, k)).collect();
    // 8 x 8 registers a thread, k steps unrolled, as HUGE, in a small (quick to compile) tile.
    let unrolled = MatmulTiles { bm: 16, bn: 16, bk: 8, tm: 8, tn: 8 };
    cases.extend([
        (unrolled, MatmulKernel { quad_a: true, double_staging: true }),
        (unrolled, MatmulKernel::default_for(unrolled)),
    ]);
    cases.push((MatmulTiles::TINY, MatmulKernel::default_for(MatmulTiles::TINY)));
    for (tiles, kernel) in cases {
        if !tiles.fits(kiln_core::device().unwrap().limits()) {
            continue;
        }
        for (m, k, n) in [(5, 200, 6), (3, 203, 2)] {
            let (a, _) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
            let (b, _) = rand_tensor(&mut rng, &[k, n], DType::F32, -1.0, 1.0);
            let one = ops::matmul_with_kernel(&a, &b, tiles, kernel).unwrap().to_bytes().unwrap();
            for steps in [1, 3] {
                let split = ops::matmul_split_k(&a, &b, tiles, kernel, steps).unwrap().to_bytes().unwrap();
                assert!(one == split, "{tiles:?} {kernel:?} {m}x{k}x{n} in dispatches of {steps} steps");
            }
        }
    }
}

#[test]
fn matmul_long_k_integers_and_f16() {
    let k = 70001;
    let av: Vec<f64> = (0..k).map(|i| (i % 7) as f64 - 3.0).collect();
    let bv: Vec<f64> = (0..k).map(|i| (i % 5) as f64 - 2.0).collect();
    let want: i64 = av.iter().zip(&bv).map(|(x, y)| (*x * *y) as i64).sum();
    let a = Tensor::from_bytes(&f64_to_bytes(DType::I32, &av), &[1, k], DType::I32).unwrap();
    let b = Tensor::from_bytes(&f64_to_bytes(DType::I32, &bv), &[k, 1], DType::I32).unwrap();
    assert_eq!(ops::matmul(&a, &b).unwrap().to_f64_vec().unwrap(), vec![want as f64], "i32");
    if !has_f16() {
        eprintln!("adapter has no f16: f16 skipped");
        return;
    }
    // Small integers: exact in f16 inputs and in the f32 accumulator; the sum (< 2048) exact in f16.
    let k = 70000;
    let av: Vec<f64> = (0..k).map(|i| if i % 100 == 0 { 1.0 } else { 0.0 }).collect();
    let a = Tensor::from_bytes(&f64_to_bytes(DType::F16, &av), &[1, k], DType::F16).unwrap();
    let b = Tensor::from_bytes(&f64_to_bytes(DType::F16, &vec![1.0; k]), &[k, 1], DType::F16).unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    assert_eq!(c.dtype(), DType::F16);
    assert_eq!(c.to_f64_vec().unwrap(), vec![700.0], "f16");
}

#[test]
fn conv2d_of_many_channels_sums_every_tap() {
    use kiln_core::reference::conv as cpu;
    // A 4096-channel 3x3 window of ones: lavapipe gave 32769, not 36864, before.
    let ones = |shape: &[usize]| f32_tensor(&vec![1.0; shape.iter().product()], shape);
    let y = ops::conv2d(&ones(&[1, 4096, 3, 3]), &ones(&[1, 4096, 3, 3]), None, [1, 1], [0, 0], [1, 1], 1).unwrap();
    assert_eq!(y.to_f64_vec().unwrap(), vec![36864.0]);
    // Random, with bias and padding (taps skipped), two groups, and i32 (exact).
    let mut rng = Rng::new(9);
    for dt in [DType::F32, DType::I32] {
        let (c, o, g) = (16000, 4, 2);
        let (xs, ws) = ([1, c, 2, 3], [o, c / g, 3, 3]);
        let (lo, hi) = if dt == DType::I32 { (-3.0, 3.0) } else { (-1.0, 1.0) };
        let (x, xv) = rand_tensor(&mut rng, &xs, dt, lo, hi);
        let (w, wv) = rand_tensor(&mut rng, &ws, dt, lo, hi);
        let (b, bv) = rand_tensor(&mut rng, &[o], dt, lo, hi);
        let y = ops::conv2d(&x, &w, Some(&b), [1, 1], [1, 1], [1, 1], g).unwrap();
        let (want, shape) = cpu::conv2d(&xv, xs, &wv, ws, Some(&bv), [1, 1], [1, 1], [1, 1], g).unwrap();
        assert_eq!(y.shape(), &shape[..]);
        let atol = if dt == DType::I32 { 0.0 } else { 1e-3 };
        assert_close(&format!("conv2d {c} channels {dt}"), &y.to_f64_vec().unwrap(), &want, atol, 1e-5);
    }
    // Past the taps Auto trusts the implicit GEMM with on a CPU adapter (the direct kernel,
    // split, there; the implicit GEMM elsewhere).
    let (xs, ws) = ([1, 30100, 2, 2], [4, 30100, 3, 3]);
    let (x, xv) = rand_tensor(&mut rng, &xs, DType::F32, -1.0, 1.0);
    let (w, wv) = rand_tensor(&mut rng, &ws, DType::F32, -1.0, 1.0);
    let y = ops::conv2d(&x, &w, None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    let (want, _) = cpu::conv2d(&xv, xs, &wv, ws, None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_close("conv2d 270900 taps", &y.to_f64_vec().unwrap(), &want, 2e-3, 1e-5);
}

#[test]
fn pools_of_a_big_window_fold_every_tap() {
    use kiln_core::reference::conv as cpu;
    // 300 x 300 windows (~250 rows a dispatch on a CPU adapter), negative values (a max that
    // wrongly restarts from 0 would show), half the window in padding at the edges.
    let mut rng = Rng::new(11);
    let xs = [1, 2, 300, 300];
    let (x, xv) = rand_tensor(&mut rng, &xs, DType::F32, -1.0, -0.5);
    for (kernel, stride, padding) in [([300, 300], [1, 1], [0, 0]), ([300, 300], [150, 150], [150, 150])] {
        let what = format!("pool {kernel:?} stride {stride:?} padding {padding:?}");
        let y = ops::max_pool2d(&x, kernel, stride, padding).unwrap();
        let (want, shape) = cpu::max_pool2d(&xv, xs, kernel, stride, padding).unwrap();
        assert_eq!(y.shape(), &shape[..]);
        assert_eq!(y.to_f64_vec().unwrap(), want, "max {what}");
        let y = ops::avg_pool2d(&x, kernel, stride, padding).unwrap();
        let (want, _) = cpu::avg_pool2d(&xv, xs, kernel, stride, padding).unwrap();
        assert_close(&format!("avg {what}"), &y.to_f64_vec().unwrap(), &want, 1e-5, 1e-4);
    }
}

#[test]
fn softmax_down_a_long_column() {
    // Axis 0 of [30000, 2]: the column kernel walks the run three times per invocation.
    let mut rng = Rng::new(12);
    let s = [30000, 2];
    let (x, xv) = rand_tensor(&mut rng, &s, DType::F32, -1.0, 1.0);
    let (want, _) = kiln_core::reference::norm::softmax(&xv, &s, 0, DType::F32).unwrap();
    assert_close("softmax axis 0", &ops::softmax(&x, 0).unwrap().to_f64_vec().unwrap(), &want, 1e-9, 1e-4);
}

#[test]
fn attention_over_many_keys() {
    use kiln_core::ops::AttentionPath;
    use kiln_core::reference::attention as cpu;
    let mut rng = Rng::new(13);
    let d = 4;
    // Auto on the flash kernel's shape (past the limiter it takes split-KV on a CPU adapter),
    // causal and with a mask.
    for (lq, lk, masked, causal, path) in [
        (8usize, 70000usize, false, false, AttentionPath::Auto),
        (8, 70000, false, true, AttentionPath::Auto),
        (8, 70000, true, false, AttentionPath::Auto),
    ] {
        let (q, qv) = rand_tensor(&mut rng, &[1, lq, d], DType::F32, -1.0, 1.0);
        let (k, kv) = rand_tensor(&mut rng, &[1, lk, d], DType::F32, -1.0, 1.0);
        let (v, vv) = rand_tensor(&mut rng, &[1, lk, d], DType::F32, -1.0, 1.0);
        let (m, mv) = rand_tensor(&mut rng, &[lq, lk], DType::F32, -1.0, 1.0);
        let mask = masked.then_some(&m);
        let y = ops::attention_on_path(&q, &k, &v, mask, causal, None, path).unwrap();
        let (want, _) = cpu::attention_with_mask(
            &qv,
            &[1, lq, d],
            &kv,
            &[1, lk, d],
            &vv,
            &[1, lk, d],
            masked.then_some((&mv[..], &[lq, lk][..])),
            causal,
            None,
        )
        .unwrap();
        let what = format!("attention {lq}x{lk} mask {masked} causal {causal} {path:?}");
        assert_close(&what, &y.to_f64_vec().unwrap(), &want, 1e-4, 1e-3);
    }
    // The flash and per-row kernels asked for by name: refused past the limiter on a CPU
    // adapter (they would stop early), right elsewhere.
    let cpu = kiln_core::device().unwrap().info().device_type == "Cpu";
    let (lq, lk) = (2, 70000);
    let (q, qv) = rand_tensor(&mut rng, &[1, lq, d], DType::F32, -1.0, 1.0);
    let (k, kv) = rand_tensor(&mut rng, &[1, lk, d], DType::F32, -1.0, 1.0);
    let (v, vv) = rand_tensor(&mut rng, &[1, lk, d], DType::F32, -1.0, 1.0);
    let (want, _) = cpu::attention(&qv, &[1, lq, d], &kv, &[1, lk, d], &vv, &[1, lk, d], false, None).unwrap();
    for path in [AttentionPath::Flash, AttentionPath::Fused] {
        match ops::attention_on_path(&q, &k, &v, None, false, None, path) {
            Err(e) if cpu => assert_eq!(e.code(), kiln_core::ErrorCode::InvalidArgument, "{path:?}: {e}"),
            Ok(y) if !cpu => assert_close(&format!("{path:?}"), &y.to_f64_vec().unwrap(), &want, 1e-4, 1e-3),
            other => panic!("{path:?} over {lk} keys (CPU adapter: {cpu}): {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn sampling_with_a_long_penalty_ring() {
    use kiln_core::ops::SampleParams;
    // 8192 recent ids (the most the ring takes), many repeated: each distinct id is penalised
    // once. lavapipe picked wrong tokens here before (a quadratic search of the ring).
    let mut rng = Rng::new(14);
    let v = 49152;
    let l: Vec<f32> = (0..v).map(|_| rng.uniform(-6.0, 6.0) as f32).collect();
    let recent: Vec<u32> = (0..8192).map(|_| rng.int(0, v as i64 / 4) as u32).collect();
    let lt = Tensor::from_slice(&l, &[1, v]).unwrap();
    let rt = Tensor::from_slice(&recent, &[recent.len()]).unwrap();
    for (temperature, top_k, top_p, repetition_penalty) in
        [(0.0, 0, 1.0, 1.1), (0.8, 40, 0.95, 1.3), (0.8, 0, 1.0, 0.7)]
    {
        for _ in 0..3 {
            let p = SampleParams { temperature, top_k, top_p, repetition_penalty, random: rng.next_u64() as u32 };
            let got = ops::sample_token(&lt, &rt, &p, None).unwrap().to_vec::<i32>().unwrap()[0] as u32;
            assert_eq!(got, ops::sample_token_host(&l, &recent, &p), "{p:?}");
        }
    }
}

#[test]
fn quantized_product_of_a_long_k() {
    use kiln_core::ops::QuantFormat;
    // K = 73728 (2304 blocks; lavapipe summed ~1900 of them before) on the tiled product (9
    // rows: past the matrix-vector kernels) with a residual, against the host's dequantized
    // weights in f64.
    let mut rng = Rng::new(15);
    let (m, n, k) = (9usize, 3usize, 73728usize);
    let (x, xv) = rand_tensor(&mut rng, &[m, k], DType::F32, -1.0, 1.0);
    let (w, _) = rand_tensor(&mut rng, &[n, k], DType::F32, -1.0, 1.0);
    let (res, rv) = rand_tensor(&mut rng, &[m, n], DType::F32, -1.0, 1.0);
    let q = ops::quantize(&w, QuantFormat::Q8_0).unwrap();
    let mut wd = vec![0f32; n * k];
    ops::dequantize_host(&q.to_bytes().unwrap(), QuantFormat::Q8_0, &mut wd).unwrap();
    let want: Vec<f64> = (0..m * n)
        .map(|e| rv[e] + (0..k).map(|kk| xv[(e / n) * k + kk] * wd[(e % n) * k + kk] as f64).sum::<f64>())
        .collect();
    let fusion = ops::QuantFusion { residual: Some(&res), ..Default::default() };
    let y = ops::quant_matmul_fused(&x, &q, QuantFormat::Q8_0, n, fusion).unwrap();
    assert_close("quant product + residual", &y.to_f64_vec().unwrap(), &want, 1e-5 * k as f64, 0.0);
}

#[test]
fn reductions_and_scans_down_long_axes() {
    // Right already (reductions move a short-inner axis last onto the workgroup-strided row
    // kernel; scans are hierarchical): kept here so a kernel that walks these in one
    // invocation would fail on lavapipe.
    use kiln_core::reference as cpu;
    let mut rng = Rng::new(16);
    let s = [140000, 2];
    let (x, xv) = rand_tensor(&mut rng, &s, DType::F32, -1.0, 1.0);
    let (want, _) = cpu::reduce::var(&xv, &s, Some(&[0]), false, 0, DType::F32).unwrap();
    assert_close("var axis 0", &ops::var(&x, Some(&[0]), false, 0).unwrap().to_f64_vec().unwrap(), &want, 1e-4, 1e-3);
    let (want, _) = cpu::reduce::argmax(&xv, &s, Some(0), false).unwrap();
    assert_eq!(ops::argmax(&x, Some(0), false).unwrap().to_f64_vec().unwrap(), want, "argmax axis 0");
    let s = [100000, 2];
    let (x, xv) = rand_tensor(&mut rng, &s, DType::I32, -3.0, 3.0);
    let (want, _) = cpu::scan::cumulative(true, &xv, &s, Some(0), false, DType::I32).unwrap();
    assert_eq!(ops::cumulative_sum(&x, Some(0), None, false).unwrap().to_f64_vec().unwrap(), want, "cumsum axis 0");
}
