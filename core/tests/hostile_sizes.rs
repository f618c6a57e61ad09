//! Issue 19's size and scalar findings, re-run as their original repros: each must give a clear
//! error (never a wrapped, wrong-shaped result), and the device and other tensors must survive.
use kiln_core::{ops, DType, ErrorCode, Kernel, Tensor};

/// A tensor made before the attack: it must still read back the same afterwards.
fn witness() -> Tensor {
    Tensor::from_slice(&[1.5f32, -2.0, 3.25], &[3]).unwrap()
}

fn survived(w: &Tensor) {
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25]);
    let y = ops::add_scalar(w, 1.0).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.5, -1.0, 4.25]);
}

fn invalid<T: std::fmt::Debug>(r: kiln_core::Result<T>, what: &str) -> String {
    let e = r.expect_err(what);
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{what}: {e}");
    e.to_string()
}

#[test]
fn conv_and_pool_padding_that_overflows_is_an_error() {
    let w = witness();
    let x = ops::ones(&[1, 1, 2, 2], DType::F32).unwrap();
    let k = ops::ones(&[1, 1, 1, 1], DType::F32).unwrap();
    let big = 1usize << 63;
    // Used to return a (1,1,2,2) result: 2 + 2 * 2^63 wrapped to 2.
    let m = invalid(ops::conv2d(&x, &k, None, [1, 1], [big, 0], [1, 1], 1), "conv2d padding 2^63");
    assert!(m.contains("padd"), "{m}");
    invalid(ops::conv2d(&x, &k, None, [1, 1], [0, usize::MAX], [1, 1], 1), "conv2d padding usize::MAX");
    let e =
        ops::conv2d(&x, &ops::ones(&[1, 1, 2, 2], DType::F32).unwrap(), None, [1, 1], [0, 0], [big, 1], 1).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ShapeMismatch, "dilation 2^63: {e}");
    invalid(
        ops::conv2d(&x, &ops::ones(&[1, 1, 3, 1], DType::F32).unwrap(), None, [1, 1], [0, 0], [big, 1], 1),
        "dilation 2^63 * 2",
    );
    // A geometry that fits usize but not the kernels' 32-bit window arithmetic.
    invalid(ops::conv2d(&x, &k, None, [1 << 40, 1], [0, 0], [1, 1], 1), "stride 2^40");
    // max_pool2d used to return data for padding 2^63 (2 * padding wrapped past the kernel check).
    invalid(ops::max_pool2d(&x, [2, 2], [1, 1], [big, 0]), "max_pool2d padding 2^63");
    invalid(ops::avg_pool2d(&x, [2, 2], [1, 1], [0, big]), "avg_pool2d padding 2^63");
    // Legal geometry still computes: 2x2 of ones, 1x1 kernel of ones, padding 1 -> 4x4 with a zero border.
    let y = ops::conv2d(&x, &k, None, [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert_eq!(y.shape(), &[1, 1, 4, 4]);
    assert_eq!(y.to_vec::<f32>().unwrap().iter().sum::<f32>(), 4.0);
    survived(&w);
}

#[test]
fn shapes_whose_size_overflows_are_errors() {
    let w = witness();
    let huge = 1usize << 62;
    // Each input is a legal empty tensor; the joined axis (4 * 2^62 = 2^64) used to wrap to 0.
    let parts: Vec<Tensor> = (0..4).map(|_| Tensor::empty(&[huge, 0], DType::F32).unwrap()).collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    invalid(ops::concat(&refs, 0), "concat overflowing to 0");
    // Two of them: 2^63 fits a usize but not an addressable shape.
    invalid(ops::concat(&refs[..2], 0), "concat to 2^63");
    // A zero-size shape whose other dimensions overflow (its strides would).
    invalid(Tensor::empty(&[0, 1 << 40, 1 << 40], DType::F32), "zero-size shape with overflowing dims");
    // reshape: 4 elements to [2^62 + 1, 4] wrapped to 4 and was accepted.
    let four = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    invalid(four.reshape(&[(1isize << 62) + 1, 4]), "reshape whose product wraps");
    assert_eq!(four.reshape(&[2, -1]).unwrap().shape(), &[2, 2]);
    // slice with an enormous step is a one-element slice, not an overflowed stride.
    let s = ops::slice(&four, 0, 1, 4, isize::MAX).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![2.0]);
    survived(&w);
}

#[test]
fn more_than_two_to_the_32_workgroups_is_an_error() {
    let w = witness();
    let src = "@group(0) @binding(0) var<storage, read_write> o: array<u32>;
        @compute @workgroup_size(1) fn main() { o[0] = o[0] + 1u; }";
    let k = Kernel::new(src, "main").unwrap();
    let o = Tensor::from_slice(&[0u32], &[1]).unwrap();
    // 4096 * 4096 * 257 = 2^32 + 2^24: it ran 2^24 groups (the product mod 2^32) before.
    let m = invalid(k.dispatch(&[&o], None, [4096, 4096, 257]), "2^32 + 2^24 workgroups");
    assert!(m.contains("2^32"), "{m}");
    k.dispatch(&[&o], None, [3, 1, 1]).unwrap();
    assert!(o.to_vec::<u32>().unwrap()[0] >= 1);
    survived(&w);
}

#[test]
fn integer_scalars_out_of_range_are_errors_in_every_op() {
    let w = witness();
    let i = Tensor::from_slice(&[1i32, -2, 3], &[3]).unwrap();
    // i32 + NaN gave +0, + 1.5 gave +1, + 1e30 and + 2^40 wrapped to -2^31.
    for s in [f64::NAN, 1.5, 1e30, 2f64.powi(40), f64::INFINITY] {
        let m = invalid(ops::add_scalar(&i, s), "i32 + bad scalar");
        assert!(m.contains("i32"), "{m}");
        invalid(ops::lt_scalar(&i, s), "i32 < bad scalar");
    }
    // full(u32, -5) gave 0.
    invalid(ops::full(&[2], DType::U32, -5.0), "full u32 -5");
    invalid(ops::full(&[2], DType::I32, 0.5), "full i32 0.5");
    invalid(ops::fill(&i, f64::NAN), "fill i32 NaN");
    invalid(ops::arange(0.0, 4.0, 0.5, DType::I32), "arange i32 step 0.5");
    invalid(ops::arange(2147483640.0, 2147483700.0, 1.0, DType::I32), "arange i32 past 2^31");
    assert_eq!(
        ops::arange(2147483645.0, 2147483648.0, 1.0, DType::I32).unwrap().to_vec::<i32>().unwrap(),
        vec![2147483645, 2147483646, 2147483647]
    );
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![1, -2, 3]);
    assert_eq!(ops::add_scalar(&i, -3.0).unwrap().to_vec::<i32>().unwrap(), vec![-2, -5, 0]);
    assert_eq!(ops::full(&[2], DType::U32, 4294967295.0).unwrap().to_vec::<u32>().unwrap(), vec![u32::MAX; 2]);
    survived(&w);
}
