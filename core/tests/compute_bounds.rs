//! The compute bounds of a session (issue 28, section 2): what a dispatch may do is bounded as a
//! whole before it is submitted, kernels' `override`s are resolved before every check and every
//! charge, and built-in ops are charged by their real work (docs/DESIGN.md, "Sessions and
//! untrusted kernels").

mod common;
use kiln_core::{DType, ErrorCode, Kernel, Session, SessionLimits, ShaderPolicy};

fn policy(max_workgroup_invocations: u32) -> Session {
    Session::new(SessionLimits {
        policy: ShaderPolicy { max_workgroup_invocations, ..Default::default() },
        ..Default::default()
    })
}

/// Writes 1 at its flat global index: every invocation that ran leaves a 1.
fn mark(decls: &str, size: &str) -> String {
    format!(
        "{decls}
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size({size})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    let per = {size_product};
    let i = (wid.x + wid.y * nwg.x) * per + lid;
    if (i < arrayLength(&o)) {{ o[i] = 1u; }}
}}",
        size_product = size.split(',').map(|d| format!("({})", d.trim())).collect::<Vec<_>>().join(" * ")
    )
}

#[track_caller]
fn refused_by_policy(s: &Session, src: &str, invocations: u32) {
    let e = s.run(|| Kernel::new(src, "main")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Shader, "{e}");
    assert!(e.message().contains("policy") && e.message().contains(&format!("{invocations} invocations")), "{e}");
}

#[test]
fn an_override_workgroup_size_is_held_to_the_policy() {
    let s = policy(64);
    // The case: reflected as [1, 1, 1], accepted, and charged 1 op per workgroup.
    refused_by_policy(&s, &mark("override w: u32 = 1024u;", "w"), 1024);
    // In y and in z.
    refused_by_policy(&s, &mark("override w: u32 = 128u;", "1, w"), 128);
    refused_by_policy(&s, &mark("override w: u32 = 128u;", "1, 1, w"), 128);
    // One override computed from others, each in-limits on its own.
    refused_by_policy(&s, &mark("override a: u32 = 8u;\noverride b: u32 = a * 2u;", "a, b"), 128);
    // A mix of a literal, a const and an override.
    refused_by_policy(&s, &mark("const c: u32 = 4u;\noverride a: u32 = 8u;", "c, a, 4"), 128);
    assert_eq!(s.stats().policy_rejections, 5);
    // Kiln sets no pipeline constants: an override without a default cannot be compiled.
    let e = s.run(|| Kernel::new(&mark("override w: u32;", "w"), "main")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Shader, "{e}");
    assert!(e.message().contains("override"), "{e}");
    s.close();
}

#[test]
fn an_override_sized_workgroup_array_is_held_to_the_device_limit() {
    // `array<f32, n>` in workgroup memory is sized by the override only at pipeline creation:
    // 4 MB of workgroup memory (lavapipe segfaults compiling a 64 MiB one).
    let src = "override n: u32 = 1000000u;
var<workgroup> big: array<f32, n>;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1) fn main() { big[0] = 1.0; o[0] = big[0]; }";
    for s in [Session::new(SessionLimits::default()), policy(64)] {
        let e = s.run(|| Kernel::new(src, "main")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Shader, "{e}");
        assert!(e.message().contains("workgroup memory"), "{e}");
        s.close();
    }
    // Outside any session too.
    assert_eq!(Kernel::new(src, "main").unwrap_err().code(), ErrorCode::Shader);
}

#[test]
fn an_override_workgroup_size_within_the_policy_runs_and_is_charged_in_full() {
    let src = mark("override a: u32 = 8u;\noverride b: u32 = a / 2u;", "a, b");
    let s = policy(64);
    let k = s.run(|| Kernel::new(&src, "main")).unwrap();
    assert_eq!(k.workgroup_size(), [8, 4, 1]);
    let o = kiln_core::ops::zeros(&[3 * 32 + 5], DType::U32).unwrap();
    s.run(|| k.dispatch(&[&o], None, [3, 1, 1])).unwrap();
    // Every one of the 3 x 32 invocations ran, none past them.
    let got = o.to_vec::<u32>().unwrap();
    assert_eq!(got, [vec![1; 96], vec![0; 5]].concat());
    assert_eq!(s.stats().ops_total, 96);
    s.close();
    // The default session reflects the resolved size too.
    assert_eq!(Kernel::new(&src, "main").unwrap().workgroup_size(), [8, 4, 1]);

    // A per-dispatch budget of 63 operations: 2 workgroups of 32 invocations are 64 (counted
    // as 2 while the override was not resolved).
    let tight = Session::new(SessionLimits { max_ops_per_dispatch: 63, ..Default::default() });
    let k = tight.run(|| Kernel::new(&src, "main")).unwrap();
    let e = tight.run(|| k.dispatch(&[&o], None, [2, 1, 1])).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    tight.run(|| k.dispatch(&[&o], None, [1, 1, 1])).unwrap();
    tight.close();
}

/// The kernel: every invocation runs `p.n` dependent steps.
const SPIN: &str = "
struct P { n: u32 }
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= arrayLength(&o)) { return; }
    var acc = o[id.x];
    for (var i = 0u; i < p.n; i++) { acc = acc + 1.0; }
    o[id.x] = acc;
}";

#[track_caller]
fn compute_limit<T: std::fmt::Debug>(r: kiln_core::Result<T>) -> kiln_core::Error {
    let e = r.unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    e
}

#[test]
fn an_in_limits_kernel_that_would_take_the_device_for_days_is_refused_before_submission() {
    // The case: 65535 x 2000 workgroups x 64 invocations x 60,000 iterations, inside
    // a 2^20 loop budget and a 1e10 operation quota, kept lavapipe busy for days. Its bound is
    // 8.4e9 invocations x (1 + 2^20) iterations: refused before anything is submitted.
    let s = Session::new(SessionLimits {
        max_loop_iterations: 1 << 20,
        max_ops_total: 10_000_000_000,
        ..Default::default()
    });
    let k = s.run(|| Kernel::new(SPIN, "main")).unwrap();
    let o = kiln_core::ops::zeros(&[64], DType::F32).unwrap();
    let t = std::time::Instant::now();
    let e = compute_limit(s.run(|| k.dispatch(&[&o], Some(&60_000u32.to_le_bytes()), [65535, 2000, 1])));
    assert!(e.message().contains("operations"), "{e}");
    // Nothing ran or was counted, and the device answers at once.
    assert_eq!(o.to_vec::<f32>().unwrap(), vec![0.0; 64]);
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    let st = s.stats();
    assert_eq!((st.ops_total, st.dispatches, st.compute_limit_hits), (0, 0, 1));

    // A dispatch that fits the bound runs and gives the right result: 2 workgroups of 64
    // invocations x (1 + 1000 iterations), under a budget of 1000 iterations.
    let small = Session::new(SessionLimits {
        max_loop_iterations: 1000,
        max_ops_per_dispatch: 128 * 1001,
        ..Default::default()
    });
    let k = small.run(|| Kernel::new(SPIN, "main")).unwrap();
    let o = kiln_core::ops::zeros(&[128], DType::F32).unwrap();
    small.run(|| k.dispatch(&[&o], Some(&999u32.to_le_bytes()), [2, 1, 1])).unwrap();
    assert_eq!(o.to_vec::<f32>().unwrap(), vec![999.0; 128]);
    assert_eq!(small.stats().ops_total, 128 * 1001);
    // One workgroup more is over the per-dispatch bound, however few iterations it would run.
    compute_limit(small.run(|| k.dispatch(&[&o], Some(&1u32.to_le_bytes()), [3, 1, 1])));
    for s in [s, small] {
        s.close();
    }
}

#[test]
fn the_bound_cannot_be_passed_by_overflow_or_by_many_small_dispatches() {
    // Attack: multiply until u64 overflows. 65535^2 workgroups x 64 x (1 + 2^32 - 1) iterations
    // (the default loop budget) is past 2^64: it must saturate, not wrap to something small.
    let s = Session::new(SessionLimits { max_ops_total: u64::MAX - 1, ..Default::default() });
    let k = s.run(|| Kernel::new(SPIN, "main")).unwrap();
    let o = kiln_core::ops::zeros(&[64], DType::F32).unwrap();
    compute_limit(s.run(|| k.dispatch(&[&o], Some(&1u32.to_le_bytes()), [65535, 65535, 1])));
    s.close();

    // Attack: many small dispatches, each within the per-dispatch bound, summing past the total.
    let per = 64 * 101;
    let s = Session::new(SessionLimits { max_loop_iterations: 100, max_ops_total: 10 * per, ..Default::default() });
    let k = s.run(|| Kernel::new(SPIN, "main")).unwrap();
    let mut ran = 0;
    let e = loop {
        match s.run(|| k.dispatch(&[&o], Some(&1u32.to_le_bytes()), [1, 1, 1])) {
            Ok(()) => ran += 1,
            Err(e) => break e,
        }
        assert!(ran <= 10, "ran {ran} dispatches");
    };
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    assert_eq!(ran, 10);
    assert_eq!(s.stats().ops_total, 10 * per);
    assert_eq!(o.to_vec::<f32>().unwrap(), vec![10.0; 64]);
    s.close();
}

/// A session holding built-in ops to a per-dispatch and a total bound.
fn bounded(per_dispatch: u64, total: u64) -> Session {
    Session::new(SessionLimits { max_ops_per_dispatch: per_dispatch, max_ops_total: total, ..Default::default() })
}

#[test]
fn a_convolution_is_charged_its_multiply_adds() {
    use kiln_core::ops;
    // The case at full size (refused before it runs, so lavapipe never does the
    // ~1e12 multiply-adds): a 1024^2 image, a 1023^2 filter, 'same' padding: 1024^2 outputs of
    // 1023^2 taps each, once counted as 1,048,576 operations.
    let x = ops::zeros(&[1, 1, 1024, 1024], DType::F32).unwrap();
    let w = ops::zeros(&[1, 1, 1023, 1023], DType::F32).unwrap();
    let s = bounded(0, 10_000_000_000);
    let e = compute_limit(s.run(|| ops::conv2d(&x, &w, None, [1, 1], [511, 511], [1, 1], 1)));
    assert!(e.message().contains("conv2d"), "{e}");
    assert_eq!(s.stats().ops_total, 0);
    // The same attack through a pool: a 1023^2 window over every pixel.
    let e = compute_limit(s.run(|| ops::max_pool2d(&x, [1023, 1023], [1, 1], [511, 511])));
    assert!(e.message().contains("max_pool2d"), "{e}");
    compute_limit(s.run(|| ops::avg_pool2d(&x, [1023, 1023], [1, 1], [511, 511])));
    s.close();

    // A small convolution within the bound runs and computes the right thing: 16 outputs x
    // 6x6 pixels x 16 channels x 3x3 taps = 82,944 multiply-adds (its dispatches bind a few
    // thousand elements on top).
    let x = ops::full(&[1, 16, 8, 8], DType::F32, 1.0).unwrap();
    let w = ops::full(&[16, 16, 3, 3], DType::F32, 1.0).unwrap();
    let macs = 16 * 36 * 16 * 9;
    let s = bounded(macs + macs / 2, 0);
    let y = s.run(|| ops::conv2d(&x, &w, None, [1, 1], [0, 0], [1, 1], 1)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![144.0; 16 * 36]);
    assert!(s.stats().ops_total >= macs, "{:?}", s.stats());
    // The same output from a 7x7 filter is 49/9 of the work: over the bound.
    let w = ops::full(&[16, 16, 7, 7], DType::F32, 1.0).unwrap();
    compute_limit(s.run(|| ops::conv2d(&x, &w, None, [1, 1], [2, 2], [1, 1], 1)));
    s.close();
}

#[test]
fn matmul_and_attention_are_charged_their_multiply_adds() {
    use kiln_core::ops;
    // Batched matmul: 16 products of 256^3 are 2.7e8 multiply-adds in one call of a few MB.
    let a = ops::full(&[16, 256, 256], DType::F32, 1.0).unwrap();
    let s = bounded(100_000_000, 0);
    let e = compute_limit(s.run(|| ops::matmul(&a, &a)));
    assert!(e.message().contains("matmul"), "{e}");
    // One of them fits, and is charged at least its 256^3.
    let one = ops::full(&[256, 256], DType::F32, 1.0).unwrap();
    let y = s.run(|| ops::matmul(&one, &one)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap()[..3], [256.0; 3]);
    assert!(s.stats().ops_total >= 256 * 256 * 256);
    s.close();

    // Many small products summing past the total: refused at the product that would pass it.
    let s = bounded(0, 5 * 256 * 256 * 256 + 256 * 256 * 128);
    let mut ran = 0;
    while s.run(|| ops::matmul(&one, &one)).is_ok() {
        ran += 1;
        assert!(ran <= 5);
    }
    assert_eq!(ran, 5);
    assert!(s.stats().ops_total <= s.limits().max_ops_total);
    s.close();

    // Attention: 2048 queries x 2048 keys x (64 + 64) = 5.4e8 multiply-adds on 1.5 MB of input.
    let q = ops::full(&[1, 2048, 64], DType::F32, 0.0).unwrap();
    let s = bounded(100_000_000, 0);
    let e = compute_limit(s.run(|| ops::attention(&q, &q, &q, false, None)));
    assert!(e.message().contains("attention"), "{e}");
    s.close();
}

#[test]
fn a_reduction_is_charged_the_elements_it_reads() {
    use kiln_core::ops;
    // One workgroup may walk a long row: counted as the elements bound, not its 256 invocations.
    let n = 1 << 20;
    let x = ops::full(&[n], DType::F32, 1.0).unwrap();
    let s = bounded(n as u64 - 1, 0);
    compute_limit(s.run(|| ops::sum(&x, None, false)));
    s.close();
}

/// A chain of `depth` helpers, each calling the next `fanout` times: no loop at all, and
/// `fanout^depth` calls per invocation.
fn call_tree(depth: usize, fanout: usize) -> String {
    let mut src = String::from("@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n");
    src.push_str(&format!("fn f{depth}(x: f32) -> f32 {{ return x * 1.0001 + 0.5; }}\n"));
    for d in (0..depth).rev() {
        let calls = (0..fanout).map(|_| format!("f{}(x)", d + 1)).collect::<Vec<_>>().join(" + ");
        src.push_str(&format!("fn f{d}(x: f32) -> f32 {{ return {calls}; }}\n"));
    }
    src.push_str(
        "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { o[g.x] = f0(o[g.x]); }",
    );
    src
}

#[test]
fn a_call_tree_or_a_big_loop_body_is_charged_its_size() {
    // Counting one operation per invocation (or per loop iteration) left two multipliers free:
    // a call tree (10 helpers deep, 10 calls each: 10^10 calls per invocation, no loop) and a
    // loop body of thousands of expressions. Both are charged their inlined size now.
    let limits = SessionLimits { max_ops_per_dispatch: 10_000_000_000, ..Default::default() };
    let s = Session::new(limits.clone());
    // 10^10 calls: refused before the driver sees it (lavapipe spent its whole 20 s compile
    // budget inlining it, then went on in the background), in a session or not.
    let t = std::time::Instant::now();
    for e in [
        s.run(|| Kernel::new(&call_tree(10, 10), "main")).unwrap_err(),
        Kernel::new(&call_tree(10, 10), "main").unwrap_err(),
    ] {
        assert_eq!(e.code(), ErrorCode::Shader, "{e}");
        assert!(e.message().contains("inlined"), "{e}");
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    // 1,000 calls compile, and count their size: 125+ operations a pass.
    let tree = s.run(|| Kernel::new(&call_tree(3, 10), "main")).unwrap();
    assert!(tree.ops_per_pass() >= 1000 * 5 / 64, "{}", tree.ops_per_pass());
    let o = s.run(|| kiln_core::ops::zeros(&[64], DType::F32)).unwrap();
    // 65535 x 20 workgroups of 64: 8.4e7 invocations, under 1e10 at one operation each.
    let e = s.run(|| tree.dispatch(&[&o], None, [65535, 20, 1])).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    // A small tree (3 deep, 3 calls each: 27 calls) counts a few operations a pass and runs.
    let small = s.run(|| Kernel::new(&call_tree(3, 3), "main")).unwrap();
    assert!(small.ops_per_pass() > 1 && small.ops_per_pass() * 20 < tree.ops_per_pass(), "{}", small.ops_per_pass());
    // The loop kernel the per-dispatch bounds were measured with counts one operation a pass.
    assert_eq!(s.run(|| Kernel::new(common::SPIN, "main")).unwrap().ops_per_pass(), 1);
    s.run(|| small.dispatch(&[&o], None, [1, 1, 1])).unwrap();
    let got = o.to_vec::<f32>().unwrap();
    // f3(0) = 0.5, f2 = 3 * 0.5, f1 = 9 * 0.5, f0 = 27 * 0.5.
    assert!(got.iter().all(|&v| (v - 13.5).abs() < 1e-3), "{:?}", &got[..4]);

    // A loop body of ~4,000 expressions: ~60x the operations per iteration of a small one.
    let body: String = (0..1000).map(|i| format!("acc = acc * 1.0001 + f32({i}u & i);\n")).collect();
    let heavy = format!(
        "@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
    var acc = o[g.x];
    for (var i = 0u; i < 16u; i++) {{ {body} }}
    o[g.x] = acc;
}}"
    );
    let looped = Session::new(SessionLimits { max_loop_iterations: 16, ..limits });
    let k = looped.run(|| Kernel::new(&heavy, "main")).unwrap();
    assert!(k.ops_per_pass() >= 4000 / 64, "{}", k.ops_per_pass());
    // 2^20 workgroups x 64 x 17 passes is 1.1e9 at one op a pass (it passed), x ops_per_pass now.
    let x = looped.run(|| kiln_core::ops::zeros(&[64], DType::F32)).unwrap();
    let e = looped.run(|| k.dispatch(&[&x], None, [65535, 16, 1])).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    s.close();
    looped.close();
}

/// What the `kiln serve` tenant defaults let one dispatch cost, in time on this adapter: each
/// case is just inside 1e10 operations per dispatch (2^20 loop iterations per invocation).
/// Measurement only (`cargo test --release --test compute_bounds -- --ignored --nocapture` on
/// a GPU machine; BENCHMARKS.md, "What one tenant dispatch may cost"): lavapipe takes minutes.
#[test]
#[ignore]
fn time_of_a_dispatch_at_the_serve_defaults() {
    let budget = 1u32 << 20;
    let limits =
        SessionLimits { max_loop_iterations: budget, max_ops_per_dispatch: 10_000_000_000, ..Default::default() };
    let s = Session::new(limits);
    let time = |name: &str, f: &dyn Fn() -> kiln_core::Result<()>| {
        s.run(f).unwrap(); // compile and warm
        let t = std::time::Instant::now();
        s.run(f).unwrap();
        eprintln!("{name}: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    };
    let groups = (10_000_000_000u64 / (64 * (budget as u64 + 1))) as u32;
    // One iteration short of the budget (the guard counts the loop's last, failing test too).
    let n = budget - 1;
    let k = s.run(|| Kernel::new(SPIN, "main")).unwrap();
    let o = s.run(|| kiln_core::ops::zeros(&[groups as usize * 64], DType::F32)).unwrap();
    time(&format!("loop kernel, {groups} workgroups x 64 x 2^20 iterations"), &|| {
        k.dispatch(&[&o], Some(&n.to_le_bytes()), [groups, 1, 1])?;
        o.to_vec::<f32>().map(drop)
    });
    // Heavier bodies: the charge grows with the body, so fewer workgroups fit.
    for reps in [6, 48] {
        let heavy = SPIN.replace("acc = acc + 1.0;", &"acc = acc * 1.0001 + 0.5; ".repeat(reps));
        let k2 = s.run(|| Kernel::new(&heavy, "main")).unwrap();
        let g2 = (groups as u64 / k2.ops_per_pass()).max(1) as u32;
        time(&format!("loop body of {reps} fmas ({} ops a pass), {g2} workgroups", k2.ops_per_pass()), &|| {
            k2.dispatch(&[&o], Some(&n.to_le_bytes()), [g2, 1, 1])?;
            o.to_vec::<f32>().map(drop)
        });
    }
    let a = s.run(|| kiln_core::ops::random_uniform(&[2048, 2048], DType::F32, 1, -1.0, 1.0)).unwrap();
    time("matmul 2048^3 f32 (8.6e9 multiply-adds)", &|| kiln_core::ops::matmul(&a, &a)?.to_vec::<f32>().map(drop));
    let x = s.run(|| kiln_core::ops::random_uniform(&[3, 128, 128, 128], DType::F32, 2, -1.0, 1.0)).unwrap();
    let w = s.run(|| kiln_core::ops::random_uniform(&[128, 128, 3, 3], DType::F32, 3, -1.0, 1.0)).unwrap();
    time("conv2d [3,128,128,128] * [128,128,3,3] (9.1e9 multiply-adds)", &|| {
        kiln_core::ops::conv2d(&x, &w, None, [1, 1], [1, 1], [1, 1], 1)?.to_vec::<f32>().map(drop)
    });
    s.close();
}
