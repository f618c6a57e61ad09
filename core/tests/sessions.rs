//! Sessions: memory quotas, operation budgets, ownership and close (docs/DESIGN.md, "Sessions
//! and untrusted kernels").

mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp};
use kiln_core::reference::elementwise::binary_value;
use kiln_core::{DType, ErrorCode, Kernel, Session, SessionLimits, Tensor};
use std::sync::Mutex;

/// The device-wide memory checks need the device to themselves.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn limits(max_bytes: u64) -> SessionLimits {
    SessionLimits { max_bytes, ..Default::default() }
}

/// a + b on the GPU, checked against the CPU reference; returns [a, b, a + b].
fn checked_add3(rng: &mut Rng, n: usize) -> [Tensor; 3] {
    let (a, av) = rand_tensor(rng, &[n], DType::F32, -100.0, 100.0);
    let (b, bv) = rand_tensor(rng, &[n], DType::F32, -100.0, 100.0);
    let y = ops::binary(BinaryOp::Add, &a, &b).unwrap();
    let want: Vec<f64> = av.iter().zip(&bv).map(|(&x, &y)| binary_value(BinaryOp::Add, x, y, DType::F32)).collect();
    assert_close(&format!("add n={n}"), &y.to_f64_vec().unwrap(), &want, 0.0, 0.0);
    [a, b, y]
}

fn checked_add(rng: &mut Rng, n: usize) -> Tensor {
    let [_, _, y] = checked_add3(rng, n);
    y
}

#[test]
fn an_allocation_over_the_quota_fails_alone() {
    let _g = serial();
    let mut rng = Rng::new(1);
    // Size classes are powers of two: 1024 f32 take 4096 bytes, 1 f32 takes 16.
    let s = Session::new(limits(3 * 4096));
    let other = Session::new(limits(4096));
    s.run(|| {
        let [_a, _b, kept] = checked_add3(&mut rng, 1024); // exactly the quota
        assert_eq!(s.stats().bytes_in_use, 3 * 4096);
        let e = Tensor::from_slice(&[1.0f32], &[1]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
        assert!(e.message().contains(&format!("session {}", s.id())), "{e}");
        let e = ops::binary(BinaryOp::Mul, &kept, &kept).unwrap_err();
        assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
        // Nothing else moved: the tensor still reads, and after freeing some the session works.
        assert_eq!(s.stats().bytes_in_use, 3 * 4096);
        assert_eq!(s.stats().quota_exceeded, 2);
        assert_eq!(kept.to_vec::<f32>().unwrap().len(), 1024);
    });
    // Every tensor is dropped: the session is empty and usable again.
    assert_eq!(s.stats().bytes_in_use, 0);
    s.run(|| checked_add(&mut rng, 13));
    // Another session and the default session are untouched by s's quota.
    other.run(|| {
        let x = Tensor::from_slice(&[2.0f32; 1024], &[1024]).unwrap();
        assert_eq!(Tensor::empty(&[1], DType::F32).unwrap_err().code(), ErrorCode::QuotaExceeded);
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0; 1024]);
    });
    checked_add(&mut rng, 1031);
    assert_eq!(other.stats().peak_bytes, 4096);
    s.close();
    other.close();
}

#[test]
fn operations_are_counted_and_budgeted() {
    let _g = serial();
    let mut rng = Rng::new(2);
    const N: usize = 1 << 16;
    let a = Tensor::from_slice(&vec![1.0f32; N], &[N]).unwrap();
    let small = Tensor::from_slice(&[1.0f32; 7], &[7]).unwrap();
    // Measure what one add counts, in an unlimited session.
    let probe = Session::new(SessionLimits::default());
    probe.run(|| ops::binary(BinaryOp::Add, &small, &small).unwrap());
    let tiny = probe.stats().ops_total;
    probe.run(|| ops::binary(BinaryOp::Add, &a, &a).unwrap());
    let one = probe.stats().ops_total - tiny;
    // Invocations, not elements: a kernel may handle several elements per invocation.
    assert!(one > tiny && tiny > 0, "adds of 7 and {N} elements counted {tiny} and {one} operations");
    assert_eq!(probe.stats().dispatches, 2);

    let per = Session::new(SessionLimits { max_ops_per_dispatch: one - 1, ..Default::default() });
    per.run(|| {
        let e = ops::binary(BinaryOp::Add, &a, &a).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
        checked_add(&mut rng, 7);
    });
    assert_eq!(per.stats().compute_limit_hits, 1);

    let total = Session::new(SessionLimits { max_ops_total: 2 * one, ..Default::default() });
    total.run(|| {
        let y = ops::binary(BinaryOp::Add, &a, &a).unwrap();
        let z = ops::binary(BinaryOp::Add, &y, &a).unwrap();
        let e = ops::binary(BinaryOp::Add, &z, &a).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![3.0; N]);
    });
    assert_eq!(total.stats().ops_total, 2 * one);
    for s in [probe, per, total] {
        s.close();
    }
}

#[test]
fn closing_frees_everything_and_leaves_handles_invalid() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(3);
    let outside = checked_add(&mut rng, 257);
    let before = dev.memory_stats().in_use_bytes;
    let s = Session::new(SessionLimits::default());
    let (t, k) = s.run(|| {
        let t = checked_add(&mut rng, 1031);
        let k = Kernel::new(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
             if (g.x < arrayLength(&x)) { x[g.x] = x[g.x] * 2.0; } }",
            "main",
        )
        .unwrap();
        (t, k)
    });
    assert!(dev.memory_stats().in_use_bytes > before);
    assert_eq!(s.stats().live_buffers, 1);
    s.close();
    s.close(); // twice is fine
    assert_eq!(dev.memory_stats().in_use_bytes, before, "closing gave the session's memory back");
    let e = t.to_vec::<f32>().unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.message().contains("closed"), "{e}");
    let e = ops::binary(BinaryOp::Add, &t, &t).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = k.dispatch(&[&outside], None, [5, 1, 1]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = s.run(|| Tensor::empty(&[4], DType::F32)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // The default session and its tensors carry on.
    assert_eq!(outside.to_vec::<f32>().unwrap().len(), 257);
    checked_add(&mut rng, 1);
    drop(t);
    assert_eq!(dev.memory_stats().in_use_bytes, before);
}

#[test]
fn many_sessions_on_many_threads() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let before = dev.memory_stats().in_use_bytes;
    let threads: Vec<_> = (0..16u64)
        .map(|i| {
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + i);
                let s = Session::new(limits(3 * 1024));
                let refused = s.run(|| {
                    let keep = checked_add3(&mut rng, 200); // 3 tensors of the 1 KiB class
                    let e = Tensor::empty(&[1], DType::F32).unwrap_err();
                    drop(keep);
                    e.code()
                });
                let stats = s.stats();
                s.close();
                (refused, stats)
            })
        })
        .collect();
    for t in threads {
        let (code, stats) = t.join().unwrap();
        assert_eq!(code, ErrorCode::QuotaExceeded);
        assert_eq!((stats.bytes_in_use, stats.peak_bytes, stats.quota_exceeded), (0, 3 * 1024, 1));
    }
    assert_eq!(dev.memory_stats().in_use_bytes, before);
}

#[test]
fn a_thousand_sessions_at_once() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let before = dev.memory_stats().in_use_bytes;
    const THREADS: u64 = 16;
    const PER_THREAD: u64 = 63; // 1008 sessions open at the same time
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(THREADS as usize + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // A failure must still reach the barriers, or every other thread waits forever.
                let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut rng = Rng::new(1000 + i);
                    let sessions: Vec<Session> = (0..PER_THREAD).map(|_| Session::new(limits(3 * 64))).collect();
                    let mut held = Vec::new();
                    for s in &sessions {
                        s.run(|| {
                            let n = rng.int(9, 16) as usize; // 36-64 bytes: one 64-byte class each
                            held.push(checked_add3(&mut rng, n));
                            let e = Tensor::empty(&[1], DType::F32).unwrap_err();
                            assert_eq!(e.code(), ErrorCode::QuotaExceeded);
                        });
                    }
                    (sessions, held)
                }));
                barrier.wait(); // every session is open and holds its tensors here
                barrier.wait();
                let (sessions, held) = opened.unwrap_or_else(|p| std::panic::resume_unwind(p));
                for s in &sessions {
                    assert_eq!((s.stats().bytes_in_use, s.stats().quota_exceeded), (3 * 64, 1));
                    s.close();
                }
                drop(held);
            })
        })
        .collect();
    barrier.wait();
    let open = kiln_core::session::live_sessions().into_iter().filter(|s| !s.is_closed()).count();
    barrier.wait();
    for t in threads {
        t.join().unwrap();
    }
    assert!(open >= (THREADS * PER_THREAD) as usize, "{open} sessions open");
    assert_eq!(dev.memory_stats().in_use_bytes, before, "no memory left after every session closed");
}

/// Issue 28: error messages named sessions by a global counter ("session 17 has run ..."), so a
/// tenant could count the sessions others opened between two of its own. The id a message names
/// is still the session's own (the bindings key on it), but consecutive ids say nothing.
#[test]
fn session_ids_in_messages_do_not_count_other_sessions() {
    let _g = serial();
    let named = |s: &Session| {
        let e = s.run(|| Tensor::empty(&[1024], DType::F32).unwrap_err());
        assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
        let id: u64 = e.message().split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(id, s.id(), "{e}");
        id
    };
    let first = Session::new(limits(16));
    let a = named(&first);
    let others: Vec<Session> = (0..50).map(|_| Session::new(limits(16))).collect();
    let second = Session::new(limits(16));
    let b = named(&second);
    // A counter would put them 51 apart; any small distance would still hint at a count.
    assert!(a.abs_diff(b) > 1 << 20, "ids {a} and {b} of sessions opened 51 apart");
    let mut ids: Vec<u64> = others.iter().map(Session::id).chain([a, b]).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 52, "session ids must stay unique");
    for s in others.iter().chain([&first, &second]) {
        s.close();
    }
}

/// The native tier's quantized product allocates scratch of its own (W and x as f16); a session
/// whose quota holds the operands and the result but not that scratch still gets the product:
/// the refusal is counted and the cooperative kernel (no scratch) runs instead. On a device
/// without the native tier nothing is refused and the same product runs.
#[test]
fn quant_product_scratch_over_the_quota_falls_back() {
    let _g = serial();
    let mut rng = Rng::new(7);
    let (m, n, k) = (128usize, 2048usize, 2048usize);
    let f = ops::QuantFormat::Q4_0;
    let wv: Vec<f32> = (0..n * k).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let wq = kiln_core::reference::quant::quantize(&wv, f);
    let xv: Vec<f64> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let want = kiln_core::reference::quant::quant_matmul(&xv, m, k, &wq, f, n);
    // f16 roundings of x and W (either kernel), f32 sums: core/tests/quant_coop.rs's bound.
    let sxw = kiln_core::reference::quant::quant_matmul_abs(&xv, m, k, &wq, f, n);
    // Size classes are powers of two: W's 2,359,296 bytes take 4 MiB, x and the result 1 MiB
    // each; W's f16 copy alone needs 8 MiB.
    let s = Session::new(limits(7 << 20));
    let dev = kiln_core::device().unwrap();
    let native = ops::native_tiling_available(&dev, "cm2_m");
    s.run(|| {
        let w = ops::quant_from_bytes(&dev, &wq, f, n, k).unwrap();
        let x = Tensor::from_slice(&xv.iter().map(|&v| v as f32).collect::<Vec<_>>(), &[m, k]).unwrap();
        let y = ops::quant_matmul(&x, &w, f, n).unwrap().to_f64_vec().unwrap();
        for (i, (g, w)) in y.iter().zip(&want).enumerate() {
            let tol = (2f64.powi(-10) + (k as f64 + 2.0) * 2f64.powi(-23)) * sxw[i] + 1e-6;
            assert!((g - w).abs() <= tol, "y[{i}] = {g}, reference {w} (tolerance {tol})");
        }
    });
    assert_eq!(s.stats().quota_exceeded > 0, native, "native tier here: {native}");
    s.close();
}
