//! A wait that runs past KILN_TIMEOUT_MS: the caller gets TIMEOUT, the device is given up (every
//! later call on it answers DEVICE_LOST at once, none blocks), and the next call gets a fresh
//! device that works. Its own test binary: it sets the timeout and loses the default device.
mod common;
use kiln_core::{ops, ErrorCode, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `groups` workgroups of 64 invocations, 60,000 steps each.
fn spin(groups: u32) -> Tensor {
    common::spin(groups, 60_000)
}

#[test]
fn a_timed_out_wait_resets_the_device_and_later_calls_work() {
    if let Ok(n) = std::env::var("KILN_SPIN_CALIBRATE") {
        let t = Instant::now();
        let v = spin(n.parse().unwrap()).to_vec::<f32>().unwrap();
        eprintln!("spin {n}: {:?} -> {:?}", t.elapsed(), &v[..1]);
        return;
    }
    // Workgroups for ~6 s of work at this machine's speed now, timed on a device that is then
    // dropped, so the timeout below applies to a fresh one.
    let groups = common::spin_groups_for(Duration::from_secs(6), 60_000);
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
