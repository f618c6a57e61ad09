mod common;
use common::*;
use kiln_core::dtype::f64_to_bytes;
use kiln_core::ops;
use kiln_core::ops::ConvPath;
use kiln_core::reference::conv as cpu;
use kiln_core::{DType, ErrorCode, Tensor};

fn conv_tol(dt: DType, taps: usize) -> (f64, f64) {
    match dt {
        DType::F32 => (2e-6 * (taps as f64 + 1.0), 1e-5),
        DType::F16 => (2e-3 + 2e-5 * taps as f64, 2e-3),
        _ => (0.0, 0.0),
    }
}

#[allow(clippy::too_many_arguments)]
fn check_conv(
    rng: &mut Rng,
    x_shape: [usize; 4],
    w_shape: [usize; 4],
    bias: bool,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    dt: DType,
) {
    let (x, xv) = rand_tensor(rng, &x_shape, dt, -1.0, 1.0);
    let (w, wv) = rand_tensor(rng, &w_shape, dt, -1.0, 1.0);
    let (b, bv) = rand_tensor(rng, &[w_shape[0]], dt, -1.0, 1.0);
    let what =
        format!("conv2d x{x_shape:?} w{w_shape:?} bias={bias} s{stride:?} p{padding:?} d{dilation:?} g{groups} {dt}");
    let y = ops::conv2d(&x, &w, bias.then_some(&b), stride, padding, dilation, groups)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let (want, shape) =
        cpu::conv2d(&xv, x_shape, &wv, w_shape, bias.then_some(&bv[..]), stride, padding, dilation, groups).unwrap();
    assert_eq!(y.shape(), &shape[..], "{what}");
    let (atol, rtol) = conv_tol(dt, w_shape[1] * w_shape[2] * w_shape[3]);
    assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
}

#[test]
fn conv2d_matches_reference() {
    poison();
    let mut rng = Rng::new(21);
    // (x, w, bias, stride, padding, dilation, groups)
    #[allow(clippy::type_complexity)]
    let cases: &[([usize; 4], [usize; 4], bool, [usize; 2], [usize; 2], [usize; 2], usize)] = &[
        ([1, 1, 5, 5], [1, 1, 3, 3], false, [1, 1], [0, 0], [1, 1], 1),
        ([2, 3, 7, 11], [4, 3, 3, 3], true, [1, 1], [1, 1], [1, 1], 1),
        ([2, 3, 13, 7], [5, 3, 3, 2], true, [2, 3], [1, 0], [1, 1], 1),
        ([1, 4, 17, 13], [6, 2, 3, 3], true, [1, 2], [2, 1], [2, 3], 2),
        ([3, 6, 11, 11], [6, 1, 3, 3], true, [1, 1], [1, 1], [1, 1], 6), // depthwise
        ([2, 6, 7, 5], [12, 1, 5, 3], false, [2, 1], [2, 1], [1, 1], 6), // depthwise, multiplier 2
        ([2, 8, 9, 9], [5, 8, 1, 1], true, [1, 1], [0, 0], [1, 1], 1),   // 1x1
        ([1, 8, 9, 9], [4, 2, 1, 1], false, [2, 2], [0, 0], [1, 1], 4),  // grouped 1x1, strided
        ([1, 2, 3, 3], [3, 2, 3, 3], true, [1, 1], [0, 0], [1, 1], 1),   // one output pixel
        ([1, 2, 1, 1], [3, 2, 3, 3], true, [1, 1], [1, 1], [1, 1], 1),   // all padding but the centre
        ([2, 3, 31, 29], [7, 3, 5, 5], true, [3, 2], [2, 2], [2, 1], 1), // prime sizes
        ([0, 3, 5, 5], [2, 3, 3, 3], true, [1, 1], [0, 0], [1, 1], 1),   // empty batch
        ([1, 3, 5, 5], [0, 3, 3, 3], false, [1, 1], [0, 0], [1, 1], 1),  // no output channels
        ([1, 0, 5, 5], [2, 0, 3, 3], true, [1, 1], [0, 0], [1, 1], 1),   // no input channels: bias only
    ];
    for dt in float_dtypes() {
        for &(xs, ws, bias, s, p, d, g) in cases {
            check_conv(&mut rng, xs, ws, bias, s, p, d, g, dt);
        }
    }
    // Integers, exact.
    for &(xs, ws, bias, s, p, d, g) in &cases[..6] {
        let (x, xv) = rand_tensor(&mut rng, &xs, DType::I32, -20.0, 20.0);
        let (w, wv) = rand_tensor(&mut rng, &ws, DType::I32, -20.0, 20.0);
        let (b, bv) = rand_tensor(&mut rng, &[ws[0]], DType::I32, -20.0, 20.0);
        let y = ops::conv2d(&x, &w, bias.then_some(&b), s, p, d, g).unwrap();
        let (want, _) = cpu::conv2d(&xv, xs, &wv, ws, bias.then_some(&bv[..]), s, p, d, g).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), want, "i32 conv {xs:?} {ws:?}");
    }
}

#[test]
fn conv2d_unbatched_input() {
    poison();
    let mut rng = Rng::new(22);
    let (x, xv) = rand_tensor(&mut rng, &[3, 7, 6], DType::F32, -1.0, 1.0);
    let (w, wv) = rand_tensor(&mut rng, &[2, 3, 3, 3], DType::F32, -1.0, 1.0);
    let y = ops::conv2d(&x, &w, None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_eq!(y.shape(), &[2, 7, 6]);
    let (want, _) = cpu::conv2d(&xv, [1, 3, 7, 6], &wv, [2, 3, 3, 3], None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_close("unbatched conv", &y.to_f64_vec().unwrap(), &want, 1e-5, 1e-5);
}

#[test]
fn conv2d_errors() {
    let x = Tensor::from_slice(&[0.0f32; 2 * 4 * 5 * 5], &[2, 4, 5, 5]).unwrap();
    let w = Tensor::from_slice(&[0.0f32; 3 * 4 * 3 * 3], &[3, 4, 3, 3]).unwrap();
    let conv =
        |x: &Tensor, w: &Tensor, b: Option<&Tensor>, s, p, d, g| ops::conv2d(x, w, b, s, p, d, g).unwrap_err().code();
    // Channels not divisible by groups.
    assert_eq!(conv(&x, &w, None, [1, 1], [0, 0], [1, 1], 3), ErrorCode::ShapeMismatch);
    // Weight channels disagree with input channels / groups.
    let w2 = Tensor::from_slice(&[0.0f32; 4 * 4 * 3 * 3], &[4, 4, 3, 3]).unwrap();
    assert_eq!(conv(&x, &w2, None, [1, 1], [0, 0], [1, 1], 2), ErrorCode::ShapeMismatch);
    // Kernel larger than the padded input (also through dilation).
    let big = Tensor::from_slice(&[0.0f32; 3 * 4 * 7 * 3], &[3, 4, 7, 3]).unwrap();
    assert_eq!(conv(&x, &big, None, [1, 1], [0, 0], [1, 1], 1), ErrorCode::ShapeMismatch);
    assert_eq!(conv(&x, &w, None, [1, 1], [0, 0], [3, 1], 1), ErrorCode::ShapeMismatch);
    assert!(ops::conv2d(&x, &big, None, [1, 1], [1, 0], [1, 1], 1).is_ok());
    // Zero stride, dilation or groups.
    assert_eq!(conv(&x, &w, None, [0, 1], [0, 0], [1, 1], 1), ErrorCode::InvalidArgument);
    assert_eq!(conv(&x, &w, None, [1, 1], [0, 0], [1, 0], 1), ErrorCode::InvalidArgument);
    assert_eq!(conv(&x, &w, None, [1, 1], [0, 0], [1, 1], 0), ErrorCode::InvalidArgument);
    // Bad bias, ranks and dtypes.
    let b = Tensor::from_slice(&[0.0f32; 4], &[4]).unwrap();
    assert_eq!(conv(&x, &w, Some(&b), [1, 1], [0, 0], [1, 1], 1), ErrorCode::ShapeMismatch);
    let bi = Tensor::from_slice(&[0i32; 3], &[3]).unwrap();
    assert_eq!(conv(&x, &w, Some(&bi), [1, 1], [0, 0], [1, 1], 1), ErrorCode::DTypeMismatch);
    let wi = Tensor::from_slice(&[0i32; 3 * 4 * 3 * 3], &[3, 4, 3, 3]).unwrap();
    assert_eq!(conv(&x, &wi, None, [1, 1], [0, 0], [1, 1], 1), ErrorCode::DTypeMismatch);
    let flat = x.reshape(&[8, 25]).unwrap();
    assert_eq!(conv(&flat, &w, None, [1, 1], [0, 0], [1, 1], 1), ErrorCode::ShapeMismatch);
    assert_eq!(conv(&x, &w.reshape(&[3, 36]).unwrap(), None, [1, 1], [0, 0], [1, 1], 1), ErrorCode::ShapeMismatch);
}

#[test]
fn pools_match_reference() {
    poison();
    let mut rng = Rng::new(23);
    // (x, kernel, stride, padding)
    #[allow(clippy::type_complexity)]
    let cases: &[([usize; 4], [usize; 2], [usize; 2], [usize; 2])] = &[
        ([1, 1, 4, 4], [2, 2], [2, 2], [0, 0]),
        ([2, 3, 7, 11], [3, 3], [2, 2], [1, 1]),
        ([2, 3, 13, 7], [3, 2], [1, 2], [1, 1]),
        ([1, 5, 17, 19], [5, 3], [3, 1], [2, 0]),
        ([3, 2, 1, 1], [1, 1], [1, 1], [0, 0]),
        ([1, 2, 2, 3], [2, 2], [1, 1], [1, 1]), // windows mostly padding
        ([1, 1, 31, 29], [4, 4], [4, 3], [2, 1]),
        ([0, 3, 5, 5], [2, 2], [2, 2], [0, 0]),
    ];
    for dt in float_dtypes() {
        for &(xs, k, s, p) in cases {
            // Negative values everywhere: a padded zero winning the max would show.
            let (x, xv) = rand_tensor(&mut rng, &xs, dt, -10.0, -0.5);
            let what = format!("x{xs:?} k{k:?} s{s:?} p{p:?} {dt}");
            let y = ops::max_pool2d(&x, k, s, p).unwrap();
            let (want, shape) = cpu::max_pool2d(&xv, xs, k, s, p).unwrap();
            assert_eq!(y.shape(), &shape[..], "{what}");
            assert_eq!(y.to_f64_vec().unwrap(), want, "max_pool2d {what}");
            let (x, xv) = rand_tensor(&mut rng, &xs, dt, -1.0, 1.0);
            let y = ops::avg_pool2d(&x, k, s, p).unwrap();
            let (want, shape) = cpu::avg_pool2d(&xv, xs, k, s, p).unwrap();
            assert_eq!(y.shape(), &shape[..], "{what}");
            let (atol, rtol) = tol(dt);
            assert_close(&format!("avg_pool2d {what}"), &y.to_f64_vec().unwrap(), &want, atol * 4.0, rtol * 4.0);
        }
    }
    for dt in [DType::I32, DType::U32] {
        let (x, xv) = rand_tensor(&mut rng, &[2, 3, 9, 8], dt, 0.0, 1000.0);
        let y = ops::max_pool2d(&x, [3, 3], [2, 2], [1, 1]).unwrap();
        let (want, _) = cpu::max_pool2d(&xv, [2, 3, 9, 8], [3, 3], [2, 2], [1, 1]).unwrap();
        assert_eq!(y.to_f64_vec().unwrap(), want, "{dt} max_pool2d");
    }
    // Unbatched CHW.
    let (x, xv) = rand_tensor(&mut rng, &[3, 6, 5], DType::F32, -1.0, 1.0);
    let y = ops::max_pool2d(&x, [2, 2], [2, 2], [1, 0]).unwrap();
    assert_eq!(y.shape(), &[3, 4, 2]);
    assert_eq!(y.to_f64_vec().unwrap(), cpu::max_pool2d(&xv, [1, 3, 6, 5], [2, 2], [2, 2], [1, 0]).unwrap().0);
}

#[test]
fn pool_errors() {
    let x = Tensor::from_slice(&[0.0f32; 2 * 3 * 5 * 5], &[2, 3, 5, 5]).unwrap();
    assert_eq!(ops::max_pool2d(&x, [2, 2], [0, 1], [0, 0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::avg_pool2d(&x, [0, 2], [1, 1], [0, 0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::max_pool2d(&x, [2, 2], [1, 1], [2, 0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::max_pool2d(&x, [6, 2], [1, 1], [0, 0]).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(
        ops::max_pool2d(&x.reshape(&[6, 25]).unwrap(), [1, 1], [1, 1], [0, 0]).unwrap_err().code(),
        ErrorCode::ShapeMismatch
    );
    let xi = Tensor::from_slice(&[0i32; 25], &[1, 1, 5, 5]).unwrap();
    assert_eq!(ops::avg_pool2d(&xi, [2, 2], [2, 2], [0, 0]).unwrap_err().code(), ErrorCode::DTypeMismatch);
}

#[test]
fn conv_and_pool_are_deterministic() {
    let mut rng = Rng::new(24);
    let (x, _) = rand_tensor(&mut rng, &[2, 4, 13, 11], DType::F32, -1.0, 1.0);
    let (w, _) = rand_tensor(&mut rng, &[6, 2, 3, 3], DType::F32, -1.0, 1.0);
    let run = || {
        let y = ops::conv2d(&x, &w, None, [1, 2], [1, 1], [2, 1], 2).unwrap().to_bytes().unwrap();
        let z = ops::avg_pool2d(&x, [3, 3], [2, 2], [1, 1]).unwrap().to_bytes().unwrap();
        (y, z)
    };
    let first = run();
    assert_eq!(run(), first);
    assert_eq!(run(), first);
}

#[test]
fn conv2d_through_matmul_matches_reference() {
    // Float convolutions with at least 2^22 multiply-adds run as an implicit GEMM (f16 on
    // cooperative matrices where the device has them), 1x1 stride-1 unpadded ones as a matmul;
    // these shapes cross that line.
    poison();
    let mut rng = Rng::new(22);
    #[allow(clippy::type_complexity)]
    let cases: &[([usize; 4], [usize; 4], bool, [usize; 2], [usize; 2], [usize; 2])] = &[
        ([2, 16, 30, 29], [24, 16, 3, 3], true, [1, 1], [1, 1], [1, 1]),
        ([2, 16, 30, 29], [24, 16, 3, 3], false, [1, 1], [1, 1], [1, 1]),
        ([3, 64, 23, 19], [128, 64, 1, 1], true, [1, 1], [0, 0], [1, 1]), // 1x1: matmul
        ([2, 64, 23, 19], [96, 64, 1, 1], false, [2, 2], [0, 0], [1, 1]), // strided 1x1: implicit GEMM
        ([2, 8, 67, 53], [40, 8, 5, 3], true, [2, 1], [2, 1], [2, 1]),    // stride, padding, dilation
        ([8, 64, 64, 64], [8, 64, 3, 3], true, [1, 1], [1, 1], [1, 1]),   // thin tiles, many workgroups
        ([2, 4, 190, 180], [64, 4, 3, 3], false, [1, 1], [1, 1], [1, 1]), // 512+ tiles: the big coop tiling
    ];
    for dt in float_dtypes() {
        for &(xs, ws, bias, s, p, d) in cases {
            check_conv(&mut rng, xs, ws, bias, s, p, d, 1, dt);
        }
    }
    // Unbatched input takes the same path and stays unbatched.
    let (x, xv) = rand_tensor(&mut rng, &[16, 40, 40], DType::F32, -1.0, 1.0);
    let (w, wv) = rand_tensor(&mut rng, &[32, 16, 3, 3], DType::F32, -1.0, 1.0);
    let y = ops::conv2d(&x, &w, None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_eq!(y.shape(), &[32, 40, 40]);
    let (want, _) = cpu::conv2d(&xv, [1, 16, 40, 40], &wv, [32, 16, 3, 3], None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_close("unbatched conv2d through matmul", &y.to_f64_vec().unwrap(), &want, 2e-6 * 145.0, 1e-5);
}

/// Every conv2d path that takes the case, forced, against the reference. Returns the paths run.
#[allow(clippy::too_many_arguments)]
fn check_paths(
    rng: &mut Rng,
    x_shape: &[usize],
    w_shape: [usize; 4],
    bias: bool,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    dt: DType,
) -> Vec<ConvPath> {
    let (x, xv) = rand_tensor(rng, x_shape, dt, -1.0, 1.0);
    let (w, wv) = rand_tensor(rng, &w_shape, dt, -1.0, 1.0);
    let (b, bv) = rand_tensor(rng, &[w_shape[0]], dt, -1.0, 1.0);
    let x4: [usize; 4] = match *x_shape {
        [c, h, w] => [1, c, h, w],
        [n, c, h, w] => [n, c, h, w],
        _ => unreachable!(),
    };
    let (want, shape) =
        cpu::conv2d(&xv, x4, &wv, w_shape, bias.then_some(&bv[..]), stride, padding, dilation, groups).unwrap();
    let shape = &shape[4 - x_shape.len()..];
    let (atol, rtol) = conv_tol(dt, w_shape[1] * w_shape[2] * w_shape[3]);
    let mut ran = Vec::new();
    let pointwise = groups == 1 && w_shape[2..] == [1, 1] && stride == [1, 1] && padding == [0, 0];
    // The depthwise kernel's input window: 8 output rows by 32 columns at least.
    let window =
        (7 * stride[0] + (w_shape[2] - 1) * dilation[0] + 1) * (31 * stride[1] + (w_shape[3] - 1) * dilation[1] + 1);
    let depthwise = w_shape[1] == 1 && window <= 4096;
    let paths =
        [ConvPath::Auto, ConvPath::Direct, ConvPath::Matmul, ConvPath::Implicit, ConvPath::Coop, ConvPath::Depthwise];
    for path in paths {
        let what = format!(
            "conv2d {path:?} x{x_shape:?} w{w_shape:?} bias={bias} s{stride:?} p{padding:?} d{dilation:?} g{groups} {dt}"
        );
        let y = match ops::conv2d_on_path(&x, &w, bias.then_some(&b), stride, padding, dilation, groups, path) {
            Ok(y) => y,
            Err(e) => {
                // The paths that cannot take the case say so; nothing else may fail.
                let refused = match path {
                    ConvPath::Matmul => !pointwise && e.code() == ErrorCode::InvalidArgument,
                    ConvPath::Depthwise => !depthwise && e.code() == ErrorCode::InvalidArgument,
                    ConvPath::Coop => match dt {
                        DType::F16 => !coop_device() && e.code() == ErrorCode::Unsupported,
                        _ => e.code() == ErrorCode::InvalidArgument,
                    },
                    _ => false,
                };
                assert!(refused, "{what}: {e}");
                continue;
            }
        };
        assert_eq!(y.shape(), shape, "{what}");
        assert_close(&what, &y.to_f64_vec().unwrap(), &want, atol, rtol);
        ran.push(path);
    }
    ran
}

fn coop_device() -> bool {
    ops::conv2d_has_cooperative_matrix(&kiln_core::device().unwrap())
}

#[test]
fn conv2d_every_path_matches_reference() {
    poison();
    let mut rng = Rng::new(31);
    // (x, w, bias, stride, padding, dilation, groups)
    #[allow(clippy::type_complexity)]
    let cases: &[(&[usize], [usize; 4], bool, [usize; 2], [usize; 2], [usize; 2], usize)] = &[
        (&[1, 1, 1, 1], [1, 1, 1, 1], true, [1, 1], [0, 0], [1, 1], 1), // all ones
        (&[1, 1, 5, 5], [1, 1, 3, 3], false, [1, 1], [0, 0], [1, 1], 1),
        (&[2, 3, 7, 11], [4, 3, 3, 3], true, [1, 1], [1, 1], [1, 1], 1),
        (&[3, 5, 13, 7], [7, 5, 3, 2], true, [2, 3], [1, 0], [1, 1], 1), // primes, non-square
        (&[2, 3, 11, 13], [5, 3, 3, 3], false, [3, 2], [2, 3], [1, 1], 1), // padding > kernel / 2
        (&[1, 4, 17, 13], [6, 2, 3, 3], true, [1, 2], [2, 1], [2, 3], 2), // groups, dilation
        (&[3, 6, 11, 11], [6, 1, 3, 3], true, [1, 1], [1, 1], [1, 1], 6), // depthwise
        (&[2, 6, 7, 5], [12, 1, 5, 3], false, [2, 1], [2, 1], [1, 1], 6), // depthwise, multiplier 2
        (&[2, 3, 70, 37], [3, 1, 3, 3], true, [1, 1], [1, 1], [1, 1], 3), // depthwise, > one tile
        (&[1, 4, 41, 67], [8, 1, 5, 4], true, [2, 3], [3, 2], [2, 1], 4), // depthwise, strided, dilated
        (&[1, 2, 85, 90], [2, 1, 3, 3], false, [1, 1], [0, 0], [40, 40], 2), // depthwise window too big
        (&[2, 8, 9, 9], [5, 8, 1, 1], true, [1, 1], [0, 0], [1, 1], 1),  // 1x1
        (&[1, 8, 9, 9], [4, 2, 1, 1], false, [2, 2], [0, 0], [1, 1], 4), // grouped 1x1, strided
        (&[1, 2, 1, 1], [3, 2, 3, 3], true, [1, 1], [1, 1], [1, 1], 1),  // all padding but the centre
        (&[5, 4, 3], [6, 5, 2, 2], true, [1, 1], [1, 1], [2, 2], 1),     // unbatched
        // Past one tile in M, N and K, K not a multiple of 16 or 32 (7 * 3 * 3 = 63).
        (&[2, 7, 19, 23], [70, 7, 3, 3], true, [1, 1], [1, 1], [1, 1], 1),
        (&[1, 12, 15, 17], [36, 4, 3, 3], false, [1, 1], [1, 1], [1, 1], 3), // groups of 12 channels
        (&[1, 40, 9, 9], [130, 20, 1, 3], true, [1, 1], [0, 1], [1, 1], 2),  // M > 64 per group
        (&[2, 16, 20, 21], [20, 16, 3, 3], true, [2, 2], [1, 1], [1, 1], 1), // 17-32 channels
        // K by tap (channels per group a multiple of the K step): padding, stride, dilation,
        // groups, M past one tile, a step count that is not a multiple of anything.
        (&[2, 16, 11, 13], [9, 16, 3, 5], true, [2, 1], [2, 3], [2, 1], 1),
        (&[1, 32, 9, 7], [70, 16, 3, 3], false, [1, 1], [1, 1], [1, 1], 2),
        (&[3, 48, 6, 5], [20, 48, 2, 2], true, [1, 2], [1, 0], [1, 1], 1),
        (&[0, 3, 5, 5], [2, 3, 3, 3], true, [1, 1], [0, 0], [1, 1], 1), // empty batch
        (&[1, 3, 5, 5], [0, 3, 3, 3], false, [1, 1], [0, 0], [1, 1], 1), // no output channels
        (&[1, 0, 5, 5], [2, 0, 3, 3], true, [1, 1], [0, 0], [1, 1], 1), // no input channels: bias only
        (&[1, 0, 5, 5], [2, 0, 3, 3], false, [1, 1], [0, 0], [1, 1], 1), // ... and no bias: zeros
    ];
    for dt in float_dtypes() {
        for &(xs, ws, bias, s, p, d, g) in cases {
            let ran = check_paths(&mut rng, xs, ws, bias, s, p, d, g, dt);
            assert!(ran.contains(&ConvPath::Implicit) && ran.contains(&ConvPath::Direct), "{ran:?}");
        }
    }
}

#[test]
fn conv2d_paths_propagate_nan_and_inf() {
    poison();
    let mut rng = Rng::new(32);
    let xs = [2, 5, 9, 10];
    // Dense and depthwise weights.
    for (ws, groups) in [([6, 5, 3, 3], 1), ([5, 1, 3, 3], 5)] {
        for dt in float_dtypes() {
            let (_, mut xv) = rand_tensor(&mut rng, &xs, dt, -1.0, 1.0);
            let (w, wv) = rand_tensor(&mut rng, &ws, dt, -1.0, 1.0);
            let xv_len = xv.len();
            // A NaN, a +inf and a -inf in x (their windows' outputs NaN or inf, an inf meeting
            // the -inf NaN); the rest finite.
            for (i, v) in [(13, f64::NAN), (200, f64::INFINITY), (xv_len - 7, f64::NEG_INFINITY), (450, 0.0)] {
                xv[i] = v;
            }
            let x = Tensor::from_bytes(&f64_to_bytes(dt, &xv), &xs, dt).unwrap();
            let (want, _) = cpu::conv2d(&xv, xs, &wv, ws, None, [1, 1], [1, 1], [1, 1], groups).unwrap();
            assert!(want.iter().any(|v| v.is_nan()) && want.iter().any(|v| v.is_infinite()));
            let (atol, rtol) = conv_tol(dt, 45);
            let mut ran = 0;
            for path in [ConvPath::Direct, ConvPath::Implicit, ConvPath::Coop, ConvPath::Depthwise] {
                let y = match ops::conv2d_on_path(&x, &w, None, [1, 1], [1, 1], [1, 1], groups, path) {
                    Ok(y) => y,
                    Err(_) if path == ConvPath::Coop || (path == ConvPath::Depthwise && groups == 1) => continue,
                    Err(e) => panic!("{path:?} {dt}: {e}"),
                };
                assert_close(&format!("{path:?} {dt} g{groups} specials"), &y.to_f64_vec().unwrap(), &want, atol, rtol);
                ran += 1;
            }
            assert!(ran >= 2 + usize::from(groups > 1), "{ran} paths ran");
        }
    }
}

/// The cooperative-matrix kernel's WGSL, for the shapes of device it may meet, through naga
/// (lavapipe cannot run it).
#[test]
fn conv_coop_source_validates() {
    for acc in ["f32", "f16"] {
        for sg in [32, 64] {
            for which in 0..3 {
                for (bias, pf, by_tap) in
                    [(false, true, true), (true, true, false), (true, false, true), (false, false, false)]
                {
                    let src = ops::conv_coop_source_for_tests(acc, sg, which, bias, pf, by_tap);
                    let what = format!(
                        "acc {acc}, subgroup {sg}, tiling {which}, bias {bias}, prefetch {pf}, by tap {by_tap}"
                    );
                    assert_wgsl_compiles(&what, &src);
                }
            }
        }
    }
}

/// The depthwise kernel bakes its geometry into the pipeline, so a caller choosing kernel
/// sizes and strides could grow the device's pipeline cache without bound: past
/// `SHAPED_CACHE_ENTRIES` the least recently used are evicted, and an evicted geometry
/// recompiles and still gives the reference result.
#[test]
fn depthwise_pipelines_are_bounded() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(41);
    let (x, xv) = rand_tensor(&mut rng, &[1, 2, 12, 12], DType::F32, -1.0, 1.0);
    let run = |rng: &mut Rng, kh: usize, kw: usize, s: usize| {
        let w_shape = [2, 1, kh, kw];
        let (w, wv) = rand_tensor(rng, &w_shape, DType::F32, -1.0, 1.0);
        let what = format!("depthwise k{kh}x{kw} s{s}");
        let y = ops::conv2d_on_path(&x, &w, None, [s, s], [kh / 2, kw / 2], [1, 1], 2, ConvPath::Depthwise)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let (want, _) =
            cpu::conv2d(&xv, [1, 2, 12, 12], &wv, w_shape, None, [s, s], [kh / 2, kw / 2], [1, 1], 2).unwrap();
        assert_close(&what, &y.to_f64_vec().unwrap(), &want, 1e-5, 1e-5);
    };
    run(&mut rng, 3, 3, 1);
    // Only the shaped count: other tests compile built-in pipelines in parallel threads.
    let cap = kiln_core::pipeline::SHAPED_CACHE_ENTRIES as u64;
    let mut geometries = 0;
    for s in 1..=2 {
        for kh in 1..=6 {
            for kw in 1..=6 {
                run(&mut rng, kh, kw, s);
                geometries += 1;
                let st = dev.pipeline_stats();
                assert!(st.shaped_pipelines <= cap, "{st:?} after {geometries} geometries");
                assert!(st.shaped_pipelines >= geometries.min(cap), "{st:?} after {geometries} geometries");
            }
        }
    }
    assert!(geometries > cap, "the test must pass the cap ({geometries} geometries)");
    // The first geometry was evicted long ago: recompiled, still right.
    run(&mut rng, 3, 3, 1);
}
