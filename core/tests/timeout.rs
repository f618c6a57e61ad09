//! A wait that runs past KILN_TIMEOUT_MS: the caller gets TIMEOUT, the device is given up (every
//! later call on it answers DEVICE_LOST at once, none blocks), and the next call gets a fresh
//! device that works. Its own test binary: it sets the timeout and loses the default device.
use kiln_core::{ops, ErrorCode, Kernel, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every invocation runs `p.n` dependent steps (lavapipe ends a shader's loops after 65535
/// iterations in all, so the work is made long by many invocations rather than one long loop).
const SPIN: &str = "
struct P { n: u32 }
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = o[id.x];
    for (var i = 0u; i < p.n; i++) { acc = fract(acc * 1.618034 + f32(i & 7u) * 0.1) + 5.0; }
    o[id.x] = acc;
}";

/// `groups` workgroups of 64 invocations, 60,000 steps each.
fn spin(groups: u32) -> Tensor {
    let k = Kernel::new(SPIN, "main").unwrap();
    let o = ops::zeros(&[groups as usize * 64], kiln_core::DType::F32).unwrap();
    k.dispatch(&[&o], Some(&60_000u32.to_le_bytes()), [groups, 1, 1]).unwrap();
    o
}

#[test]
fn a_timed_out_wait_resets_the_device_and_later_calls_work() {
    if let Ok(n) = std::env::var("KILN_SPIN_CALIBRATE") {
        let t = Instant::now();
        let v = spin(n.parse().unwrap()).to_vec::<f32>().unwrap();
        eprintln!("spin {n}: {:?} -> {:?}", t.elapsed(), &v[..1]);
        return;
    }
    // Workgroups for ~6 s of work at this machine's speed now (a fixed 1000 was ~5 s once, and
    // finishes inside the timeout on a faster or idler machine); timed on a device that is then
    // dropped, so the timeout below applies to a fresh one.
    let t = Instant::now();
    spin(100).to_vec::<f32>().unwrap();
    let per_group = t.elapsed().as_secs_f64() / 100.0;
    let groups = ((6.0 / per_group).ceil() as u32).clamp(500, 20_000);
    kiln_core::reset_devices();
    std::env::set_var("KILN_TIMEOUT_MS", "1500");
    let old = kiln_core::device().unwrap();
    let before = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(before.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);

    // About 6 s of work, far more than the 1.5 s allowed.
    let long = spin(groups);
    let t = Instant::now();
    let err = long.to_vec::<f32>().unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    assert!(err.to_string().contains("KILN_TIMEOUT_MS") && err.to_string().contains("reset"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5), "the timeout took {:?}", t.elapsed());
    assert!(old.is_lost());

    // Every later call on the old device answers at once (it used to block in queue.submit).
    let t = Instant::now();
    assert_eq!(before.to_vec::<f32>().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(ops::add_scalar(&before, 1.0).unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(old.synchronize().unwrap_err().code(), ErrorCode::DeviceLost);
    assert!(t.elapsed() < Duration::from_secs(1), "calls on the lost device took {:?}", t.elapsed());

    // A fresh device serves the next call, ops and kernels alike. lavapipe runs every device on
    // one thread pool (as a GPU without preemption runs every context on one chip), so the new
    // device's first results come once the runaway work ends: give it the default timeout.
    std::env::remove_var("KILN_TIMEOUT_MS");
    let new = kiln_core::device().unwrap();
    assert!(!Arc::ptr_eq(&old, &new));
    let c = Tensor::from_slice(&[5.0f32, 6.0], &[2]).unwrap();
    assert_eq!(ops::mul_scalar(&c, 2.0).unwrap().to_vec::<f32>().unwrap(), vec![10.0, 12.0]);
    let short = spin(1).to_vec::<f32>().unwrap();
    assert!(short.iter().all(|&v| (5.0..6.0).contains(&v)), "{short:?}");
    drop((before, long, old));
    new.synchronize().unwrap();
}
