//! Tensors of two devices in one op: a named InvalidArgument, never a wgpu validation panic or a
//! device left broken. Two adapters without a GPU: Mesa's llvmpipe through Vulkan (lavapipe) and
//! through OpenGL (`KILN_BACKENDS=vulkan,gl`), both in the Mesa packages the tests already use.
//! One test in this binary: it sets the environment before anything reads it.

use kiln_core::{ops, Error, Tensor};

fn refused(what: &str, r: kiln_core::Result<Tensor>) {
    match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("device"), "{what}: {m}"),
        Err(e) => panic!("{what}: {e} (expected InvalidArgument naming the devices)"),
        Ok(_) => panic!("{what}: ran on tensors of two devices"),
    }
}

#[test]
fn ops_on_tensors_of_two_devices_are_refused_and_both_devices_keep_working() {
    // SAFETY: the first thing this process does; no other thread reads the environment yet.
    unsafe { std::env::set_var("KILN_BACKENDS", "vulkan,gl") };
    let rt = kiln_core::runtime();
    let n = rt.adapters().len();
    assert!(n >= 2, "needs two adapters (llvmpipe through Vulkan and through GL): found {n}");
    let (d0, d1) = (rt.device_at(0).unwrap(), rt.device_at(1).unwrap());
    let x = [1f32, -2., 3., -4., 5., -6.];
    let a = Tensor::from_slice_on(&d0, &x, &[2, 3]).unwrap();
    let b = Tensor::from_slice_on(&d1, &x, &[2, 3]).unwrap();
    let bt = Tensor::from_slice_on(&d1, &x, &[3, 2]).unwrap();
    let w = Tensor::from_slice_on(&d1, &[1f32, 1., 1.], &[3]).unwrap();
    let idx = Tensor::from_slice_on(&d1, &[1i32, 0], &[2]).unwrap();
    let cond = ops::gt_scalar(&b, 0.0).unwrap();
    refused("add", ops::add(&a, &b));
    refused("add (other order)", ops::add(&b, &a));
    refused("matmul", ops::matmul(&a, &bt));
    refused("where", ops::where_(&cond, &a, &a));
    refused("concat", ops::concat(&[&a, &b], 0));
    refused("layer_norm weight", ops::layer_norm(&a, Some(&w), None, 1e-5));
    refused("index_select", ops::index_select(&a, 0, &idx));
    // Ops whose operands come in other roles: masks, weights, biases, indices, limits.
    let q = |d| Tensor::from_slice_on(d, &[0.5f32; 2 * 4 * 8], &[2, 4, 8]).unwrap();
    let (q0, q1) = (q(&d0), q(&d1));
    refused("attention k", ops::attention(&q0, &q1, &q0, false, None));
    refused("attention v", ops::attention(&q0, &q0, &q1, true, None));
    let mask = Tensor::from_slice_on(&d1, &[0f32; 16], &[4, 4]).unwrap();
    refused("attention mask", ops::attention_with_mask(&q0, &q0, &q0, Some(&mask), false, None));
    let img = |d| Tensor::from_slice_on(d, &[1f32; 2 * 3 * 3], &[1, 2, 3, 3]).unwrap();
    let k = |d| Tensor::from_slice_on(d, &[1f32; 2 * 2], &[2, 1, 1, 2]).unwrap();
    refused("conv2d weight", ops::conv2d(&img(&d0), &k(&d1), None, [1, 1], [0, 0], [1, 1], 2));
    let bias = Tensor::from_slice_on(&d1, &[1f32, 2.], &[2]).unwrap();
    refused("conv2d bias", ops::conv2d(&img(&d0), &k(&d0), Some(&bias), [1, 1], [0, 0], [1, 1], 2));
    refused("rms_norm weight", ops::rms_norm(&a, Some(&w), 1e-5));
    refused("clip max", ops::clip(&a, None, Some(&b)));
    refused("gather", ops::gather(&a, 0, &ops::cast(&b, kiln_core::DType::I32).unwrap()));
    let table = Tensor::from_slice_on(&d0, &[1f32; 4 * 3], &[4, 3]).unwrap();
    refused("embedding", ops::embedding(&table, &idx));
    let sorted = Tensor::from_slice_on(&d1, &[1f32, 2., 3.], &[3]).unwrap();
    refused("searchsorted", ops::searchsorted(&sorted, &a, false));
    let blocks = vec![0u8; 18 * 2]; // two Q4_0 blocks: a 2 x 32 matrix
    let wq = ops::quant_from_bytes(&d1, &blocks, ops::QuantFormat::Q4_0, 2, 32).unwrap();
    let x32 = Tensor::from_slice_on(&d0, &[1f32; 32], &[1, 32]).unwrap();
    refused("quant_matmul", ops::quant_matmul(&x32, &wq, ops::QuantFormat::Q4_0, 2));
    refused(
        "quant_embedding",
        ops::quant_embedding(&wq, ops::QuantFormat::Q4_0, 32, &Tensor::from_slice_on(&d0, &[1u32], &[1]).unwrap()),
    );
    // The way across: a copy (through host memory), then the op.
    let moved = b.to_device(&d0).unwrap();
    assert!(std::sync::Arc::ptr_eq(moved.device(), &d0) && moved.shape() == b.shape());
    assert_eq!(ops::add(&a, &moved).unwrap().to_vec::<f32>().unwrap(), x.iter().map(|v| v + v).collect::<Vec<_>>());
    let same = a.to_device(&d0).unwrap();
    assert!(same.shares_buffer(&a), "to_device onto its own device copies nothing");
    let h = Tensor::from_slice_on(&d1, &[i32::MIN, -1, 7], &[3]).unwrap();
    assert_eq!(h.to_device(&d0).unwrap().to_vec::<i32>().unwrap(), [i32::MIN, -1, 7]);
    let empty = Tensor::from_slice_on(&d1, &[0f32; 0], &[0, 3]).unwrap();
    assert_eq!(empty.to_device(&d0).unwrap().shape(), &[0, 3]);
    // A thread's default device: `with_device` scopes it (nested; restored on return and after a
    // panic); other threads keep the process's.
    let here = |d: &std::sync::Arc<kiln_core::Device>| {
        std::sync::Arc::ptr_eq(Tensor::from_slice(&x, &[6]).unwrap().device(), d)
    };
    assert!(here(&d0) && kiln_core::scoped_device().is_none());
    kiln_core::with_device(&d1, || {
        assert!(here(&d1) && std::sync::Arc::ptr_eq(&kiln_core::device().unwrap(), &d1));
        kiln_core::with_device(&d0, || assert!(here(&d0)));
        assert!(here(&d1));
        std::thread::scope(|s| s.spawn(|| assert!(here(&d0))).join().unwrap());
    });
    assert!(here(&d0));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kiln_core::with_device(&d1, || panic!("inside"))));
    assert!(r.is_err() && here(&d0) && kiln_core::scoped_device().is_none());
    // Both devices still compute.
    let want: Vec<f32> = x.iter().map(|v| v + v).collect();
    assert_eq!(ops::add(&a, &a).unwrap().to_vec::<f32>().unwrap(), want);
    assert_eq!(ops::add(&b, &b).unwrap().to_vec::<f32>().unwrap(), want);
}
