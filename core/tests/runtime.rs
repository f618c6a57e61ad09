mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp};
use kiln_core::reference::elementwise as cpu;
use kiln_core::{DType, Tensor};
use std::sync::{Mutex, MutexGuard};

/// The tests of this file share one device and its batch; the early-submit test counts the
/// batch's submits with a GPU timer, which another test's reads or timer would disturb, so they
/// run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn adapters_are_listed_and_one_is_chosen() {
    let _serial = serial();
    let list = kiln_core::adapters();
    assert!(!list.is_empty());
    assert_eq!(list.iter().filter(|a| a.chosen).count(), 1);
    let d = kiln_core::device().unwrap();
    assert!(d.info().max_buffer_size > 0);
    let e = kiln_core::select_adapter("no-such-adapter-xyz").unwrap_err();
    assert_eq!(e.code(), kiln_core::ErrorCode::NoAdapter);
}

#[test]
fn sixteen_threads_get_correct_results() {
    let _serial = serial();
    let handles: Vec<_> = (0..16u64)
        .map(|tid| {
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + tid);
                for round in 0..10 {
                    let n = 1 + (tid as usize * 37 + round * 11) % 600;
                    let (a, av) = rand_tensor(&mut rng, &[n], DType::F32, -2.0, 2.0);
                    let (b, bv) = rand_tensor(&mut rng, &[n], DType::F32, -2.0, 2.0);
                    let c = ops::mul(&ops::add(&a, &b).unwrap(), &a).unwrap();
                    let (s, _) = cpu::binary(BinaryOp::Add, &av, &[n], &bv, &[n], DType::F32).unwrap();
                    let (want, _) = cpu::binary(BinaryOp::Mul, &s, &[n], &av, &[n], DType::F32).unwrap();
                    assert_close(&format!("thread {tid} round {round}"), &c.to_f64_vec().unwrap(), &want, 1e-6, 1e-6);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn many_small_dependent_ops_batch_then_read_once() {
    let _serial = serial();
    let mut x = Tensor::from_slice(&[0i32; 33], &[33]).unwrap();
    for _ in 0..1500 {
        x = ops::add_scalar(&x, 1.0).unwrap();
    }
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![1500; 33]);
}

#[test]
fn async_readback() {
    let _serial = serial();
    let t = Tensor::from_slice(&[1u32, 2, 3], &[3]).unwrap();
    let bytes = pollster::block_on(t.to_bytes_async()).unwrap();
    assert_eq!(bytes, t.to_bytes().unwrap());
}

/// The async surface (the browser's only one) answers what the blocking one does natively.
#[test]
fn async_surface_matches_the_blocking_one() {
    let _serial = serial();
    let dev = pollster::block_on(kiln_core::init_async()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&dev, &kiln_core::device().unwrap()));
    let host: Vec<f32> = (0..257).map(|i| ((i * 7919) % 1000) as f32 / 7.0 - 50.0).collect();
    let t = ops::mul_scalar(&Tensor::from_slice(&host, &[257]).unwrap(), 3.0).unwrap();
    pollster::block_on(kiln_core::synchronize_async()).unwrap();
    pollster::block_on(dev.synchronize_async()).unwrap();
    assert_eq!(pollster::block_on(t.to_vec_async::<f32>()).unwrap(), t.to_vec::<f32>().unwrap());
    let e = pollster::block_on(t.to_vec_async::<i32>()).unwrap_err();
    assert_eq!(e.code(), kiln_core::ErrorCode::DTypeMismatch);
}

#[test]
fn uploads_larger_than_one_staging_piece_round_trip() {
    let _serial = serial();
    // 12 MiB + 2 bytes of f16: several 8 MiB pieces and an odd tail.
    let n = 6 * 1024 * 1024 + 1;
    let host: Vec<kiln_core::f16> = (0..n).map(|i| kiln_core::f16::from_f32((i % 2048) as f32)).collect();
    let t = Tensor::from_slice(&host, &[n]).unwrap();
    assert_eq!(t.to_vec::<kiln_core::f16>().unwrap(), host);
}

#[test]
fn big_uploads_written_by_several_threads_round_trip() {
    let _serial = serial();
    // 68 MiB: nine 8 MiB pieces, written by several threads.
    let n = 17 * 1024 * 1024;
    let host: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let t = Tensor::from_slice(&host, &[n]).unwrap();
    assert!(t.to_vec::<u32>().unwrap() == host);
}

#[test]
fn gpu_timer_times_the_passes_it_covers() {
    let _serial = serial();
    let dev = kiln_core::device().unwrap();
    // The timer belongs to the device's batch, so passes other threads record meanwhile are
    // timed too; this only checks that the figure exists and is plausible.
    assert_eq!(dev.stop_gpu_timer().unwrap(), None, "no timer was started");
    let x = Tensor::from_slice(&vec![1.5f32; 1 << 16], &[1 << 16]).unwrap();
    if !dev.start_gpu_timer().unwrap() {
        // No timestamp queries on this adapter: nothing is timed, and stop says so.
        assert!(!dev.info().timestamp_query);
        assert_eq!(dev.stop_gpu_timer().unwrap(), None);
        return;
    }
    assert_eq!(dev.start_gpu_timer().unwrap_err().code(), kiln_core::ErrorCode::InvalidArgument, "one timer at a time");
    let mut y = x.clone();
    for _ in 0..20 {
        y = ops::mul_scalar(&ops::add_scalar(&y, 1.0).unwrap(), 0.5).unwrap();
    }
    let t = dev.stop_gpu_timer().unwrap().expect("passes were timed");
    assert!(t.passes >= 1, "{t:?}");
    assert!(t.span_s > 0.0 && t.span_s < 10.0, "{t:?}");
    assert!(t.busy_s >= 0.0 && t.busy_s < 10.0, "{t:?}");
    // The timed work still computed the right thing: y -> (y + 1) / 2 twenty times from 1.5.
    let want = (0..20).fold(1.5f64, |v, _| (v + 1.0) * 0.5) as f32;
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| (v - want).abs() < 1e-6));
    assert_eq!(dev.stop_gpu_timer().unwrap(), None, "the timer stops once");
}

#[test]
fn big_queued_work_is_submitted_early_and_stays_correct() {
    let _serial = serial();
    // Each op binds 2 x 64 MiB, so the batch submits on its own after the second op (FLUSH_BYTES,
    // 256 MiB), while freed intermediates are reused from the pool in between.
    let dev = kiln_core::device().unwrap();
    let n = 16 << 20;
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut y = Tensor::from_slice(&host, &[n]).unwrap();
    // A wait sets the flush threshold back to its start; the timer then counts the batch's
    // passes, one per submit (a submit closes the open pass, the next dispatch opens another).
    kiln_core::synchronize().unwrap();
    let timed = dev.start_gpu_timer().unwrap();
    for _ in 0..5 {
        y = ops::add_scalar(&y, 1.0).unwrap();
    }
    if timed {
        let t = dev.stop_gpu_timer().unwrap().expect("passes were timed");
        let passes = t.passes;
        assert!(passes >= 2, "5 ops binding 640 MiB ran in {passes} pass(es): no early submit");
    } else {
        // No timestamp queries: the submits cannot be counted here, only the results checked.
        assert!(!dev.info().timestamp_query);
    }
    let got = y.to_vec::<f32>().unwrap();
    for i in [0, 1, 999, 1000, n / 2 + 7, n - 1] {
        assert_eq!(got[i], host[i] + 5.0, "element {i}");
    }
}
