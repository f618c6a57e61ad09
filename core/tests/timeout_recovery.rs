//! After a TIMEOUT (issue 28, section 2): every owner of what was on the abandoned device is told
//! DEVICE_LOST, never INTERNAL, also one whose read was waiting when the device was given up; and
//! since a session's dispatch is bounded before submission (`SessionLimits`), the abandoned work
//! ends, so later small ops succeed again even on lavapipe, where it shares the CPU with them.
//! Its own test binary: it sets KILN_TIMEOUT_MS and loses the default device.
mod common;
use kiln_core::{ops, DType, ErrorCode, Kernel, Session, SessionLimits, Tensor};
use std::time::{Duration, Instant};

const TIMEOUT_MS: u64 = 1500;

/// Steps per invocation of the runaway dispatch; its workgroups are sized to this machine's
/// speed (`common::spin_groups_for`): ~6 s, several times the timeout, bounded by its session.
const STEPS: u32 = 60_000;

#[test]
fn a_timeout_gives_device_lost_to_every_owner_and_small_ops_recover() {
    let groups = common::spin_groups_for(Duration::from_secs(6), STEPS);
    kiln_core::reset_devices();
    std::env::set_var("KILN_TIMEOUT_MS", TIMEOUT_MS.to_string());
    let old = kiln_core::device().unwrap();
    // Tenant B's tensor, made before anything goes wrong.
    let b = Session::new(SessionLimits::default());
    let b_tensor = b.run(|| Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])).unwrap();
    assert_eq!(b_tensor.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);

    // Tenant A: a dispatch inside its bound that runs past the timeout.
    let a = Session::new(SessionLimits {
        max_loop_iterations: STEPS + 1,
        max_ops_per_dispatch: groups as u64 * 64 * (STEPS as u64 + 2),
        ..Default::default()
    });
    let long = a
        .run(|| {
            let k = Kernel::new(common::SPIN, "main")?;
            let o = ops::zeros(&[groups as usize * 64], DType::F32)?;
            k.dispatch(&[&o], Some(&STEPS.to_le_bytes()), [groups, 1, 1])?;
            Ok::<_, kiln_core::Error>(o)
        })
        .unwrap();
    // B queues work behind it and waits for it on another thread while A's wait times out.
    let queued = b.run(|| ops::add_scalar(&b_tensor, 1.0)).unwrap();
    let waiter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        queued.to_vec::<f32>()
    });
    let t_read = Instant::now();
    let e = a.run(|| long.to_vec::<f32>()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let t_out = Instant::now();
    eprintln!("A's read answered TIMEOUT after {:?}", t_read.elapsed());
    assert!(old.is_lost());
    let e = waiter.join().unwrap().unwrap_err();
    eprintln!("B's waiting read answered after {:?}", t_read.elapsed());
    assert_eq!(e.code(), ErrorCode::DeviceLost, "B's waiting read: {e}");
    // Every later access of every owner: DEVICE_LOST.
    for (what, r) in [
        ("B's tensor", b.run(|| b_tensor.to_vec::<f32>()).map(|_| ())),
        ("B's op", b.run(|| ops::add_scalar(&b_tensor, 1.0)).map(|_| ())),
        ("A's output", a.run(|| long.to_vec::<f32>()).map(|_| ())),
        ("synchronize", old.synchronize()),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.code(), ErrorCode::DeviceLost, "{what}: {e}");
    }

    // Recovery, on lavapipe too: the abandoned dispatch was bounded before submission, so it
    // ends; until then a fresh device's small op may time out as well (lavapipe runs every
    // device on one pool of CPU threads). Within the bound's time plus margin, three small ops
    // in a row must each answer well under the timeout.
    let deadline = Duration::from_secs(90);
    let mut timeouts = 0;
    let mut in_a_row = Vec::new();
    while in_a_row.len() < 3 {
        assert!(t_out.elapsed() < deadline, "no recovery within {deadline:?}: {timeouts} timeouts, {in_a_row:?}");
        let t = Instant::now();
        let r = b.run(|| {
            let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4])?;
            ops::add_scalar(&x, 1.0)?.to_vec::<f32>()
        });
        match r {
            Ok(v) => {
                assert_eq!(v, vec![2.0, 3.0, 4.0, 5.0]);
                if t.elapsed() < Duration::from_millis(TIMEOUT_MS / 2) {
                    in_a_row.push(t.elapsed());
                } else {
                    in_a_row.clear();
                }
            }
            Err(e) if matches!(e.code(), ErrorCode::Timeout | ErrorCode::DeviceLost) => {
                timeouts += 1;
                in_a_row.clear();
            }
            Err(e) => panic!("a small op after the timeout: {e}"),
        }
    }
    eprintln!(
        "recovered {:?} after the timeout ({timeouts} small ops timed out first); then 3 in a row: {in_a_row:?}",
        t_out.elapsed()
    );
    a.close();
    b.close();
}
