//! Parameter blocks through the mapped uniform ring (core/src/device/param_ring.rs): a short
//! batch's blocks are written straight into a host-visible buffer, a long batch's later blocks
//! go through the shared staged buffer, and an empty ring falls back to it. Every path is
//! checked against the CPU reference, in profiles and in sessions with a GPU-time budget too.

mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp};
use kiln_core::reference::elementwise::binary_value;
use kiln_core::{profile, DType, ErrorCode, Session, SessionLimits, Tensor};
use std::sync::Mutex;

/// Profiles are process-wide and time every dispatch: the tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    // The ring is off by default: every test asks for it before its first device call.
    std::env::set_var("KILN_PARAM_RING", "8");
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Scalars that exercise every bit of the block: specials, huge, tiny, signed zeros.
fn scalars(rng: &mut Rng, n: usize) -> Vec<f64> {
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 3.0e38, -3.0e38, 1.0e-38, 1.0e-45];
    (0..n).map(|i| if i % 3 == 0 { special[(i / 3) % special.len()] } else { rng.uniform(-100.0, 100.0) }).collect()
}

fn add_ref(x: &[f64], s: f64) -> Vec<f64> {
    x.iter().map(|&v| binary_value(BinaryOp::Add, v, s as f32 as f64, DType::F32)).collect()
}

fn ring_count() -> u64 {
    kiln_core::device().unwrap().param_ring_dispatches()
}

/// Ring dispatches grew by at least `n` where the device has a ring (lavapipe and NVIDIA do).
#[track_caller]
fn assert_ring_used(before: u64, n: u64) {
    let dev = kiln_core::device().unwrap();
    if dev.has_param_ring() {
        assert!(
            dev.param_ring_dispatches() - before >= n,
            "{} ring dispatches, wanted {n}",
            dev.param_ring_dispatches()
        );
    }
}

#[test]
fn round_trips_read_their_blocks_from_the_ring() {
    let _g = serial();
    let mut rng = Rng::new(31);
    for n in [1usize, 67, 257] {
        let (x, xv) = rand_tensor(&mut rng, &[n], DType::F32, -1e3, 1e3);
        let before = ring_count();
        let ss = scalars(&mut rng, 30);
        for &s in &ss {
            let y = ops::add_scalar(&x, s).unwrap();
            assert_close(&format!("x + {s} (n {n})"), &y.to_f64_vec().unwrap(), &add_ref(&xv, s), 0.0, 0.0);
        }
        assert_ring_used(before, ss.len() as u64);
    }
}

#[test]
fn a_long_batch_mixes_ring_and_shared_blocks() {
    let _g = serial();
    let mut rng = Rng::new(32);
    let dev = kiln_core::device().unwrap();
    // A dependent chain after a wait: the first batch's first blocks in a ring buffer, the rest
    // in the shared buffer; the batches after its early submit (no wait between) keep the shared
    // buffer, so a chain of small ops runs as it was measured before the ring.
    let mut chain = |ops_n: usize| {
        let (mut y, mut want) = rand_tensor(&mut rng, &[130], DType::F32, -10.0, 10.0);
        dev.synchronize().unwrap();
        let before = ring_count();
        for i in 0..ops_n {
            let s = rng.uniform(-2.0, 2.0) + (i % 7) as f64;
            y = ops::add_scalar(&y, s).unwrap();
            want = add_ref(&want, s);
        }
        assert_close(&format!("{ops_n} dependent adds"), &y.to_f64_vec().unwrap(), &want, 0.0, 0.0);
        ring_count() - before
    };
    // 256 ops fill at least one ring buffer (it holds at most 4096 / 16 blocks): one batch's worth.
    let one_batch = chain(256);
    // 1000 ops: three batches (early submits after 256 and 512 more), only the first with a ring.
    let three_batches = chain(1000);
    if dev.has_param_ring() {
        assert!(one_batch >= 1);
        assert_eq!(three_batches, one_batch, "later batches of the chain took ring buffers");
    }
}

#[test]
fn an_empty_ring_falls_back_to_the_shared_buffer() {
    let _g = serial();
    let mut rng = Rng::new(33);
    let dev = kiln_core::device().unwrap();
    let (x, xv) = rand_tensor(&mut rng, &[97], DType::F32, -1.0, 1.0);
    // Far more submissions in flight than ring buffers, none waited for: most find no mapped
    // buffer and take the staged path; all must read their own block.
    let ss = scalars(&mut rng, 64);
    let ys: Vec<Tensor> = ss
        .iter()
        .map(|&s| {
            let y = ops::add_scalar(&x, s).unwrap();
            dev.flush().unwrap();
            y
        })
        .collect();
    for (y, &s) in ys.iter().zip(&ss) {
        assert_close(&format!("x + {s}"), &y.to_f64_vec().unwrap(), &add_ref(&xv, s), 0.0, 0.0);
    }
    // Once the GPU is idle and polled, the ring buffers are back.
    dev.synchronize().unwrap();
    let before = ring_count();
    let y = ops::add_scalar(&x, 1.5).unwrap();
    assert_close("x + 1.5 after", &y.to_f64_vec().unwrap(), &add_ref(&xv, 1.5), 0.0, 0.0);
    assert_ring_used(before, 1);
}

#[test]
fn profiled_dispatches_read_their_blocks_from_the_ring() {
    let _g = serial();
    let mut rng = Rng::new(34);
    let (x, xv) = rand_tensor(&mut rng, &[300], DType::F32, -5.0, 5.0);
    let ss = scalars(&mut rng, 5);
    let before = ring_count();
    // One pass per dispatch, each with its timestamps, its block in the ring.
    let (got, p) = profile::profile(|| {
        let mut y = x.clone();
        for &s in &ss {
            y = ops::add_scalar(&y, s).unwrap();
        }
        y.to_f64_vec().unwrap()
    })
    .unwrap();
    let want = ss.iter().fold(xv, |acc, &s| add_ref(&acc, s));
    assert_close("profiled chain", &got, &want, 0.0, 0.0);
    assert_eq!(p.rows.iter().map(|r| r.calls).sum::<u64>(), ss.len() as u64, "{p}");
    assert!(p.rows.iter().all(|r| r.timed == r.calls), "{p}");
    assert_ring_used(before, ss.len() as u64);
}

#[test]
fn sessions_with_a_gpu_time_budget_use_the_ring_and_still_refuse_once_spent() {
    let _g = serial();
    let mut rng = Rng::new(35);
    let (x, xv) = rand_tensor(&mut rng, &[1 << 12], DType::F32, -1.0, 1.0);
    let ample = Session::new(SessionLimits { max_gpu_time_ms: 1 << 40, ..Default::default() });
    let before = ring_count();
    ample.run(|| {
        for s in scalars(&mut rng, 12) {
            let y = ops::add_scalar(&x, s).unwrap();
            assert_close(&format!("x + {s} in a session"), &y.to_f64_vec().unwrap(), &add_ref(&xv, s), 0.0, 0.0);
        }
    });
    assert_ring_used(before, 12);
    assert_eq!(ample.stats().dispatches, 12);
    let dev = kiln_core::device().unwrap();
    if dev.info().timestamp_query {
        assert!(ample.stats().gpu_time_ns > 0, "{:?}", ample.stats());
    }
    ample.close();

    // A budget of 1 ms runs out within a few hundred small round trips, with the ring in use.
    let (big, _) = rand_tensor(&mut rng, &[1 << 16], DType::F32, -1.0, 1.0);
    let tight = Session::new(SessionLimits { max_gpu_time_ms: 1, ..Default::default() });
    let refused = tight.run(|| {
        for i in 0..20_000 {
            match ops::add_scalar(&big, i as f64) {
                Ok(y) => drop(y.to_vec::<f32>().unwrap()),
                Err(e) => return Some(e),
            }
        }
        None
    });
    let e = refused.expect("the GPU-time budget never ran out");
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    assert!(tight.stats().gpu_time_ns >= 1_000_000, "{:?}", tight.stats());
    tight.close();
}
