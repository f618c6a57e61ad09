//! Kernels of a session: bounded loops (COMPUTE_LIMIT instead of a hung device) and the shader
//! policy (docs/DESIGN.md, "Sessions and untrusted kernels").

mod common;
use common::*;
use kiln_core::{DType, ErrorCode, Kernel, Session, SessionLimits, ShaderPolicy, Tensor};

fn budget(n: u32) -> Session {
    Session::new(SessionLimits { max_loop_iterations: n, ..Default::default() })
}

/// x[i] = sum of j for j < n[i], by a loop of n[i] iterations.
const TRIANGLE: &str = "
@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if (i >= arrayLength(&x)) { return; }
    var s = 0u;
    for (var j = 0u; j < n[i]; j++) { s += j; }
    x[i] = s;
}";

fn triangle(counts: &[u32]) -> kiln_core::Result<Vec<u32>> {
    let k = Kernel::new(TRIANGLE, "main")?;
    let n = Tensor::from_slice(counts, &[counts.len()])?;
    let x = Tensor::empty(&[counts.len()], DType::U32)?;
    k.dispatch(&[&n, &x], None, [(counts.len() as u32).div_ceil(64).max(1), 1, 1])?;
    x.to_vec::<u32>()
}

#[test]
fn loops_within_the_budget_give_the_right_result() {
    let mut rng = Rng::new(7);
    let counts: Vec<u32> = (0..131).map(|_| rng.int(0, 99) as u32).collect();
    let want: Vec<u32> = counts.iter().map(|&c| (0..c).sum()).collect();
    // A for loop enters its body once more than it iterates (the test that ends it is inside).
    let s = budget(100);
    assert_eq!(s.run(|| triangle(&counts)).unwrap(), want);
    // The default session runs the same kernel unbounded.
    assert_eq!(triangle(&counts).unwrap(), want);
    s.close();
}

#[test]
fn a_loop_one_past_the_budget_is_stopped() {
    let s = budget(100);
    assert_eq!(s.run(|| triangle(&[99, 3])).unwrap(), vec![(0..99).sum::<u32>(), 3]);
    let e = s.run(|| triangle(&[100, 3])).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    assert!(e.message().contains("loop budget"), "{e}");
    assert_eq!(s.stats().compute_limit_hits, 1);
    s.close();
}

/// Runs `body` (WGSL statements writing `x[0]`) as a one-invocation kernel under a budget of
/// 1000 and expects COMPUTE_LIMIT; then the device and another session carry on.
fn expect_stopped(what: &str, helpers: &str, body: &str) {
    let src = format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n{helpers}\n\
         @compute @workgroup_size(1) fn main() {{\n{body}\n}}"
    );
    let s = budget(1000);
    let other = Session::new(SessionLimits::default());
    let keep = other.run(|| Tensor::from_slice(&[5.0f32, 6.0], &[2])).unwrap();
    let e = s
        .run(|| {
            let k = Kernel::new(&src, "main")?;
            let x = Tensor::from_slice(&[0.0f32; 4], &[4])?;
            k.dispatch(&[&x], None, [1, 1, 1])?;
            x.to_vec::<f32>()
        })
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{what}: {e}");
    // Everything else carries on: the default session, the other session's tensor.
    let mut rng = Rng::new(9);
    let (a, av) = rand_tensor(&mut rng, &[33], DType::F32, -1.0, 1.0);
    let y = kiln_core::ops::binary(kiln_core::ops::BinaryOp::Mul, &a, &a).unwrap();
    let want: Vec<f64> = av.iter().map(|v| ((*v as f32) * (*v as f32)) as f64).collect();
    assert_close(what, &y.to_f64_vec().unwrap(), &want, 0.0, 0.0);
    assert_eq!(keep.to_vec::<f32>().unwrap(), vec![5.0, 6.0], "{what}");
    s.close();
    other.close();
}

#[test]
fn a_loop_without_end_is_stopped() {
    expect_stopped("loop {}", "", "loop { x[0] = x[0] + 1.0; }");
    expect_stopped("while true", "", "var i = 0u; while (true) { i += 1u; if (i == 0u) { x[1] = 1.0; } }");
    expect_stopped("continue", "", "var i = 0u; loop { i += 1u; if (i > 5u) { continue; } x[0] = f32(i); }");
}

#[test]
fn two_to_the_forty_iterations_are_stopped() {
    expect_stopped(
        "2^40 nested",
        "",
        "for (var i = 0u; i < 1048576u; i++) { for (var j = 0u; j < 1048576u; j++) { x[0] = x[0] + 1.0; } }",
    );
    expect_stopped(
        "2^40 in one u64-like loop",
        "",
        "var hi = 0u; var lo = 0u; loop { lo += 1u; if (lo == 0u) { hi += 1u; } if (hi == 256u) { break; } } x[0] = f32(hi);",
    );
}

#[test]
fn loops_in_helper_functions_are_stopped() {
    expect_stopped(
        "helper",
        "fn spin(n: u32) -> f32 { var s = 0.0; for (var i = 0u; i < n; i++) { s += 1.0; } return s; }\n\
         fn twice(n: u32) -> f32 { var s = 0.0; for (var i = 0u; i < 4u; i++) { s += spin(n); } return s; }",
        "for (var k = 0u; k < 1000000u; k++) { x[0] = x[0] + twice(4000000000u); }",
    );
}

#[test]
fn recursion_is_refused_by_validation() {
    let s = budget(1000);
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
               fn f(n: u32) -> u32 { if (n == 0u) { return 0u; } return f(n - 1u); }\n\
               @compute @workgroup_size(1) fn main() { x[0] = f32(f(10u)); }";
    let e = s.run(|| Kernel::new(src, "main")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Shader, "{e}");
    s.close();
}

#[test]
fn a_barrier_inside_a_uniform_loop_still_works() {
    // Every invocation runs the same iterations, so the budget check stays uniform.
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
               var<workgroup> t: array<f32, 64>;\n\
               @compute @workgroup_size(64) fn main(@builtin(local_invocation_index) l: u32) {\n\
               for (var i = 0u; i < 4u; i++) { t[l] = f32(i * 64u + l); workgroupBarrier(); \
               x[l] = x[l] + t[63u - l]; workgroupBarrier(); } }";
    let want: Vec<f32> = (0..64u32).map(|l| (0..4u32).map(|i| (i * 64 + 63 - l) as f32).sum()).collect();
    let s = budget(1000);
    let x = s.run(|| Tensor::from_slice(&[0.0f32; 64], &[64])).unwrap();
    s.run(|| Kernel::new(src, "main").unwrap().dispatch(&[&x], None, [1, 1, 1])).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), want);
    s.close();
}

fn policy_error(policy: ShaderPolicy, src: &str) -> kiln_core::Error {
    let s = Session::new(SessionLimits { policy, ..Default::default() });
    let e = s.run(|| Kernel::new(src, "main")).unwrap_err();
    assert_eq!(s.stats().policy_rejections, 1, "{e}");
    s.close();
    // The default session takes the same source.
    Kernel::new(src, "main").unwrap_or_else(|e| panic!("default session refused: {e}"));
    e
}

#[test]
fn the_shader_policy_names_the_line() {
    let base = ShaderPolicy::default();
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
               @group(0) @binding(1) var<storage, read> y: array<f32>;\n\
               @compute @workgroup_size(128)\n\
               fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = y[g.x]; }";
    let e = policy_error(ShaderPolicy { max_workgroup_invocations: 64, ..base.clone() }, src);
    assert_eq!(e.code(), ErrorCode::Shader);
    assert!(e.message().starts_with("3:10: policy: workgroup size"), "{e}");
    let e = policy_error(ShaderPolicy { max_bindings: 1, ..base.clone() }, src);
    assert!(e.message().starts_with("2:") && e.message().contains("\"y\""), "{e}");
    let e = policy_error(ShaderPolicy { max_source_bytes: 100, ..base.clone() }, src);
    assert!(e.message().contains("over this session's limit of 100"), "{e}");

    let atomics = "@group(0) @binding(0) var<storage, read_write> c: atomic<u32>;\n\
                   @compute @workgroup_size(1)\nfn main() { atomicAdd(&c, 1u); }";
    let e = policy_error(ShaderPolicy { allow_atomics: false, ..base.clone() }, atomics);
    assert!(e.message().starts_with("1:") && e.message().contains("atomics"), "{e}");

    let shared = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
                  var<workgroup> t: array<f32, 4>;\n\
                  @compute @workgroup_size(4)\nfn main(@builtin(local_invocation_index) l: u32) { t[l] = 1.0; x[l] = t[l]; }";
    let e = policy_error(ShaderPolicy { allow_workgroup_memory: false, ..base.clone() }, shared);
    assert!(e.message().starts_with("2:") && e.message().contains("workgroup memory"), "{e}");

    if has_f16() {
        let half = "enable f16;\n@group(0) @binding(0) var<storage, read_write> x: array<f16>;\n\
                    @compute @workgroup_size(1)\nfn main() { x[0] = x[0] + 1.0h; }";
        let e = policy_error(ShaderPolicy { allow_f16: false, ..base.clone() }, half);
        assert!(e.message().starts_with("1:8: policy: f16"), "{e}");
    }
    // Within the policy the kernel compiles and runs.
    let s = Session::new(SessionLimits {
        policy: ShaderPolicy { max_workgroup_invocations: 128, max_bindings: 2, allow_atomics: false, ..base },
        ..Default::default()
    });
    let (x, y) = s.run(|| {
        (Tensor::from_slice(&[0.0f32; 3], &[3]).unwrap(), Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap())
    });
    s.run(|| Kernel::new(src, "main").unwrap().dispatch(&[&x, &y], None, [1, 1, 1])).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    s.close();
}
