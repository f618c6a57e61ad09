//! Profiles and GPU-time budgets where the adapter has no timestamp queries (simulated with
//! `KILN_NO_TIMESTAMPS=1`, set before this process opens its device): both fall back to the
//! wall clock, and say so.

mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp};
use kiln_core::{metrics, profile, DType, ErrorCode, Session, SessionLimits};

#[test]
fn without_timestamps_profiles_and_budgets_use_the_wall_clock() {
    std::env::set_var("KILN_NO_TIMESTAMPS", "1");
    let mut rng = Rng::new(21);
    let (a, av) = rand_tensor(&mut rng, &[1000], DType::F32, -3.0, 3.0);
    let (y, p) = profile::profile(|| {
        let y = ops::binary(BinaryOp::Mul, &a, &a).unwrap();
        ops::binary(BinaryOp::Add, &y, &a).unwrap().to_f64_vec().unwrap()
    })
    .unwrap();
    let want: Vec<f64> = av.iter().map(|&x| ((x as f32 * x as f32) + x as f32) as f64).collect();
    assert_close("x*x + x", &y, &want, 0.0, 0.0);
    assert_eq!(p.clock, profile::Clock::WallClock);
    assert!(p.to_string().contains("WALL-CLOCK"), "{p}");
    let calls: Vec<(&str, u64)> = p.rows.iter().map(|r| (r.op.as_str(), r.calls)).collect();
    assert!(calls.contains(&("elementwise:mul", 1)) && calls.contains(&("elementwise:add", 1)), "{p}");
    assert!(p.rows.iter().all(|r| r.total_s > 0.0 && r.timed == 1), "{p}");
    assert!(metrics::prometheus_text().contains("kiln_device_timestamp_queries{device=\"0\""));

    // A budget is charged the session's waits.
    let s = Session::new(SessionLimits { max_gpu_time_ms: 1, ..Default::default() });
    let (big, _) = rand_tensor(&mut rng, &[1 << 18], DType::F32, -1.0, 1.0);
    let e = s
        .run(|| {
            for _ in 0..5000 {
                ops::binary(BinaryOp::Mul, &big, &big)?.to_vec::<f32>()?;
            }
            Ok::<(), kiln_core::Error>(())
        })
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    assert!(e.message().contains("GPU time"), "{e}");
    assert!(s.stats().gpu_time_ns >= 1_000_000);
    s.close();
}
