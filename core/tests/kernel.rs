mod common;
use common::*;
use kiln_core::{ops, DType, ErrorCode, Kernel, Tensor};

const SAXPY: &str = r#"
struct P { a: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { out[g.x] = p.a * x[g.x] + y[g.x]; }
}
"#;

fn uniforms(a: f32, n: u32) -> Vec<u8> {
    let mut u = a.to_le_bytes().to_vec();
    u.extend_from_slice(&n.to_le_bytes());
    u
}

#[test]
fn custom_kernel_runs_and_reflects_bindings() {
    let k = Kernel::new(SAXPY, "main").unwrap();
    assert_eq!(k.storage_bindings().len(), 3);
    assert_eq!(k.workgroup_size(), [64, 1, 1]);
    let mut rng = Rng::new(5);
    let n = 1000;
    let (x, xv) = rand_tensor(&mut rng, &[n], DType::F32, -1.0, 1.0);
    let (y, yv) = rand_tensor(&mut rng, &[n], DType::F32, -1.0, 1.0);
    let out = Tensor::empty(&[n], DType::F32).unwrap();
    k.dispatch(&[&x, &y, &out], Some(&uniforms(2.5, n as u32)), [(n as u32).div_ceil(64), 1, 1]).unwrap();
    let want: Vec<f64> = xv.iter().zip(&yv).map(|(a, b)| (2.5f32 * *a as f32 + *b as f32) as f64).collect();
    assert_close("saxpy", &out.to_f64_vec().unwrap(), &want, 1e-6, 1e-6);
}

#[test]
fn invalid_wgsl_reports_line_and_column() {
    let err = Kernel::new("@compute @workgroup_size(1)\nfn main() {\n  let x: f32 = 1u;\n}\n", "main").unwrap_err();
    assert_eq!(err.code(), ErrorCode::Shader);
    assert!(err.message().starts_with("3:"), "message has line:column: {}", err.message());
    let err = Kernel::new("fn main( {", "main").unwrap_err();
    assert_eq!(err.code(), ErrorCode::Shader);
    assert!(err.message().starts_with("1:"), "{}", err.message());
    let err = Kernel::new(SAXPY, "nope").unwrap_err();
    assert_eq!(err.code(), ErrorCode::Shader);
    assert!(err.message().contains("nope"));
}

#[test]
fn wrong_bindings_are_errors_not_ub() {
    let k = Kernel::new(SAXPY, "main").unwrap();
    let f = Tensor::from_slice(&[1.0f32; 8], &[8]).unwrap();
    let g = Tensor::from_slice(&[1.0f32; 8], &[8]).unwrap();
    let o = Tensor::empty(&[8], DType::F32).unwrap();
    let i = Tensor::from_slice(&[1i32; 8], &[8]).unwrap();
    let u = uniforms(1.0, 8);
    // count
    assert_eq!(k.dispatch(&[&f, &g], Some(&u), [1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    // type
    assert_eq!(k.dispatch(&[&f, &i, &o], Some(&u), [1, 1, 1]).unwrap_err().code(), ErrorCode::DTypeMismatch);
    // uniforms missing / too short
    assert_eq!(k.dispatch(&[&f, &g, &o], None, [1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(k.dispatch(&[&f, &g, &o], Some(&u[..4]), [1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    // aliasing a writable binding
    assert_eq!(k.dispatch(&[&f, &g, &f], Some(&u), [1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    // too many workgroups
    let max = kiln_core::device().unwrap().limits().max_compute_workgroups_per_dimension;
    assert_eq!(k.dispatch(&[&f, &g, &o], Some(&u), [max + 1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    // fixed-size array needs enough bytes
    let fixed = Kernel::new(
        "@group(0) @binding(0) var<storage, read_write> d: array<u32, 16>;\n@compute @workgroup_size(1) fn main() { d[15] = 1u; }",
        "main",
    )
    .unwrap();
    let small = Tensor::empty(&[8], DType::U32).unwrap();
    assert_eq!(fixed.dispatch(&[&small], None, [1, 1, 1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    // the device still works
    k.dispatch(&[&f, &g, &o], Some(&u), [1, 1, 1]).unwrap();
    assert_eq!(o.to_vec::<f32>().unwrap(), vec![2.0; 8]);
}

#[test]
fn user_kernels_keep_bounds_checks() {
    // Writes far past the end of a 4-element buffer: naga's bounds checks keep it inside.
    let k = Kernel::new(
        "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n@compute @workgroup_size(1) fn main() { d[100000u] = 7u; d[0] = 1u; }",
        "main",
    )
    .unwrap();
    let keep = ops::full(&[4096], DType::U32, 5.0).unwrap();
    let t = ops::zeros(&[4], DType::U32).unwrap();
    k.dispatch(&[&t], None, [1, 1, 1]).unwrap();
    assert_eq!(t.to_vec::<u32>().unwrap()[0], 1);
    assert!(keep.to_vec::<u32>().unwrap().iter().all(|&v| v == 5));
}

#[test]
fn pipeline_cache_counts_hits() {
    let dev = kiln_core::device().unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    ops::sin(&x).unwrap();
    let before = dev.pipeline_stats();
    ops::sin(&x).unwrap();
    let after = dev.pipeline_stats();
    assert!(after.hits > before.hits);
    assert!(after.pipelines >= 1 && after.compile_seconds > 0.0);
}
