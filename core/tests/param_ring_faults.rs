//! The parameter ring (core/src/device/param_ring.rs) through a lost device and a timed-out
//! wait: ring buffers in flight or holding a recorded block when the device goes must not hang
//! or panic anything, and the fresh device's ring works. Its own test binary: it destroys the
//! process's default device and sets KILN_TIMEOUT_MS.
mod common;
use kiln_core::{ops, ErrorCode, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::spin;

/// A few round trips on the current device, checked, and the ring's use of them.
fn ring_round_trips(dev: &kiln_core::Device) {
    let before = dev.param_ring_dispatches();
    let x = Tensor::from_slice(&[1.0f32, -2.5, 1e30, -0.0], &[4]).unwrap();
    for s in [0.5f64, -3.0, 1e-40, f64::INFINITY] {
        let got = ops::add_scalar(&x, s).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f32> = [1.0f32, -2.5, 1e30, -0.0].iter().map(|&v| v + s as f32).collect();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    if dev.has_param_ring() {
        assert!(dev.param_ring_dispatches() - before >= 4);
    }
}

#[test]
fn ring_buffers_survive_a_lost_device_and_a_timeout() {
    // The ring is off by default.
    std::env::set_var("KILN_PARAM_RING", "8");
    // A lost device: ring buffers in flight (flushed, not waited for) and one holding a recorded
    // block when it goes.
    let old = kiln_core::device().unwrap();
    ring_round_trips(&old);
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let in_flight: Vec<Tensor> = (0..4)
        .map(|i| {
            let y = ops::mul_scalar(&a, i as f64).unwrap();
            old.flush().unwrap();
            y
        })
        .collect();
    let queued = ops::add_scalar(&a, 7.0).unwrap();
    old.destroy();
    let t = Instant::now();
    assert_eq!(queued.to_vec::<f32>().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(in_flight[3].to_vec::<f32>().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(ops::add_scalar(&a, 1.0).unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(old.synchronize().unwrap_err().code(), ErrorCode::DeviceLost);
    assert!(t.elapsed() < Duration::from_secs(1), "calls on the lost device took {:?}", t.elapsed());
    let fresh = kiln_core::device().unwrap();
    assert!(!Arc::ptr_eq(&old, &fresh));
    ring_round_trips(&fresh);
    drop((a, in_flight, queued, old));

    // A timeout: the runaway dispatch's block is in a ring buffer that never comes back.
    let groups = common::spin_groups_for(Duration::from_secs(6), 60_000);
    kiln_core::reset_devices();
    std::env::set_var("KILN_TIMEOUT_MS", "1500");
    let timed = kiln_core::device().unwrap();
    assert!(!Arc::ptr_eq(&fresh, &timed));
    ring_round_trips(&timed);
    let before = timed.param_ring_dispatches();
    // About 6 s of work, far more than the 1.5 s allowed.
    let long = spin(groups, 60_000);
    if timed.has_param_ring() {
        // One batch (the zeros' fill, the spin): its first blocks are the ring's.
        assert!(timed.param_ring_dispatches() > before, "the runaway block went through the ring");
    }
    let t = Instant::now();
    let err = long.to_vec::<f32>().unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    assert!(t.elapsed() < Duration::from_secs(5), "the timeout took {:?}", t.elapsed());
    assert!(timed.is_lost());
    assert_eq!(timed.synchronize().unwrap_err().code(), ErrorCode::DeviceLost);
    // lavapipe runs every device on one thread pool: the next device's first results come once
    // the runaway work ends, so it gets the default timeout.
    std::env::remove_var("KILN_TIMEOUT_MS");
    let last = kiln_core::device().unwrap();
    assert!(!Arc::ptr_eq(&timed, &last));
    ring_round_trips(&last);
    let short = spin(1, 1000).to_vec::<f32>().unwrap();
    assert!(short.iter().all(|&v| (5.0..6.0).contains(&v)), "{short:?}");
    drop((long, timed, fresh));
    last.synchronize().unwrap();
}
