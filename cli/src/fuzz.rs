//! `kiln fuzz wgsl|ops`: a seeded random driver that attacks the kernel compiler and the op API
//! for a bounded time. What it asserts is what a hostile caller must never get: a panic, an
//! INTERNAL or PANIC error, a result whose size disagrees with its shape, or a device that stops
//! working for an unrelated tensor. A crash or hang kills the run itself, which is the point.
//! The same seed replays the same attacks (up to timing: the time bound decides how many run).

use anyhow::{bail, Result};
use kiln_core::{ops, DType, ErrorCode, Kernel, Tensor};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// What to attack: wgsl (the kernel compile and dispatch path) or ops (the op API).
    target: String,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Stop after this many executions (0: only the time bound).
    #[arg(long, default_value_t = 0)]
    iterations: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// SplitMix64: tiny, seedable, and good enough to pick attacks.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Tallies outcomes; a finding is anything a hostile caller must never get.
#[derive(Default)]
struct Report {
    runs: u64,
    ok: u64,
    errors: BTreeMap<&'static str, u64>,
    findings: Vec<String>,
}

impl Report {
    fn record<T>(&mut self, what: &str, r: std::thread::Result<kiln_core::Result<T>>) -> Option<T> {
        self.runs += 1;
        match r {
            Err(p) => {
                self.findings.push(format!("{what}: panicked: {}", kiln_core::Error::from_panic(p)));
                None
            }
            Ok(Err(e)) => {
                if matches!(e.code(), ErrorCode::Internal | ErrorCode::Panic) {
                    self.findings.push(format!("{what}: {e}"));
                }
                *self.errors.entry(e.code().name()).or_default() += 1;
                None
            }
            Ok(Ok(v)) => {
                self.ok += 1;
                Some(v)
            }
        }
    }
}

fn attempt<T>(f: impl FnOnce() -> kiln_core::Result<T>) -> std::thread::Result<kiln_core::Result<T>> {
    catch_unwind(AssertUnwindSafe(f))
}

pub fn main(args: Args) -> Result<()> {
    // A runaway kernel must cost seconds here, not the default minute (and the driver checks
    // that the device comes back after such a timeout).
    if std::env::var_os("KILN_TIMEOUT_MS").is_none() {
        std::env::set_var("KILN_TIMEOUT_MS", "20000");
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let mut rng = Rng(args.seed);
    let mut report = Report::default();
    let witness_data = [1.5f32, -0.0, f32::INFINITY, 7.0];
    let mut witness = Tensor::from_slice(&witness_data, &[4])?;
    let start = Instant::now();
    let mut n = 0u64;
    while Instant::now() < deadline && (args.iterations == 0 || n < args.iterations) {
        match args.target.as_str() {
            "wgsl" => wgsl_once(&mut rng, &mut report),
            "ops" => ops_once(&mut rng, &mut report),
            t => bail!("unknown fuzz target {t:?} (wgsl or ops)"),
        }
        n += 1;
        if n.is_multiple_of(25) {
            check_witness(&mut witness, &witness_data, &mut report, n)?;
        }
    }
    check_witness(&mut witness, &witness_data, &mut report, n)?;
    let errors: Vec<String> = report.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "fuzz {}: {n} attacks, {} calls in {:.1} s (seed {}): {} ok, errors: {}; {} findings",
        args.target,
        report.runs,
        start.elapsed().as_secs_f64(),
        args.seed,
        report.ok,
        if errors.is_empty() { "none".into() } else { errors.join(", ") },
        report.findings.len()
    );
    for f in report.findings.iter().take(20) {
        println!("  finding: {f}");
    }
    if !report.findings.is_empty() {
        bail!("{} findings", report.findings.len());
    }
    Ok(())
}

/// The tensor made before the attacks must read back unchanged; after a timeout reset (its
/// device given up on purpose) it is made again on the fresh device, which must work.
fn check_witness(witness: &mut Tensor, data: &[f32; 4], report: &mut Report, n: u64) -> Result<()> {
    match witness.to_vec::<f32>() {
        Ok(v) if v.iter().zip(data).all(|(a, b)| a.to_bits() == b.to_bits()) => Ok(()),
        Ok(v) => {
            report.findings.push(format!("after {n} attacks the witness tensor reads {v:?}"));
            Ok(())
        }
        Err(e) if e.code() == ErrorCode::DeviceLost && *report.errors.get("TIMEOUT").unwrap_or(&0) > 0 => {
            *witness = Tensor::from_slice(data, &[4])?;
            Ok(())
        }
        Err(e) => bail!("after {n} attacks the device no longer works: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// wgsl: mutated kernels through compile, reflection and one dispatch

const SEEDS: &[&str] = &[
    "@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < arrayLength(&o)) { o[i] = a[i] * 2.0 + 1.0; }
}",
    "struct P { n: u32, s: f32 }
@group(0) @binding(0) var<storage, read_write> o: array<i32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(8, 8) fn main(@builtin(local_invocation_index) l: u32) {
    var acc = 0i;
    for (var i = 0u; i < p.n; i++) { acc += i32(i) * 3; }
    o[l] = acc;
}",
    "var<workgroup> tile: array<f32, 256>;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(256) fn main(@builtin(local_invocation_index) l: u32) {
    tile[l] = f32(l);
    workgroupBarrier();
    o[l] = tile[255u - l] + sqrt(abs(o[l]));
}",
    "struct S { a: vec4<f32>, b: vec4<f32> }
@group(0) @binding(0) var<storage, read_write> o: array<S>;
@group(0) @binding(1) var<storage, read> m: array<mat2x2<f32>>;
fn helper(x: f32) -> f32 { var t: array<f32, 16>; t[3] = x; return t[3] * x; }
@compute @workgroup_size(1) fn main() {
    o[0].a = vec4<f32>(helper(m[0][0][0]), 1.0, 2.0, 3.0);
    o[0].b = o[0].a * 0.5;
}",
    "@group(0) @binding(0) var<storage, read_write> o: array<atomic<u32>>;
@compute @workgroup_size(32) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    atomicAdd(&o[id.x % 4u], 1u);
    loop { if (atomicLoad(&o[0]) > 0u) { break; } }
}",
];

const TOKENS: &[&str] = &[
    "+",
    "*",
    "-",
    "/",
    "%",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ";",
    ",",
    "!",
    "&",
    "<",
    ">",
    "=",
    ".",
    "o[0]",
    "o[1]",
    " 1e38 ",
    " 0xFFFFFFFFu ",
    " -2147483648i ",
    " 4294967295u ",
    " 1e-45 ",
    " 65504h ",
    "let z = 1;",
    "var q: f32;",
    "loop { }",
    "return;",
    "break;",
    "fn f() {}",
    "workgroupBarrier();",
    "arrayLength(&o)",
    "var<workgroup> big: array<f32, 16777216>;",
    "var<private> pr: array<f32, 1048576>;",
    "var a: array<f32, 65536>;",
    "@group(0) @binding(7) var<storage, read_write> x: array<f32>;",
    "@group(3) @binding(0) var<storage, read_write> y: array<f32>;",
    "enable f16;",
    "@workgroup_size(1024, 1024)",
    "@workgroup_size(0)",
    "struct T { x: array<f32> }",
];

fn mutate(rng: &mut Rng, src: &str) -> String {
    let mut s: Vec<u8> = src.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(7) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.below(12)).min(s.len());
                s.drain(at.min(end)..end);
            }
            1 => {
                let t = rng.pick(TOKENS).as_bytes();
                s.splice(at..at, t.iter().copied());
            }
            2 if !s.is_empty() => {
                let a = rng.below(s.len());
                let b = (a + 1 + rng.below(40)).min(s.len());
                let piece = s[a..b].to_vec();
                s.splice(at..at, piece);
            }
            3 => {
                // A long flat expression, the kind that overflowed the parser's stack.
                let terms = rng.pick(&[10usize, 600, 5000, 20_000]);
                let expr = "o[0] + ".repeat(terms) + "o[0]";
                let line = format!("\nfn flat() -> f32 {{ return {expr}; }}\n");
                s.extend_from_slice(line.as_bytes());
            }
            4 => {
                // Deep nesting instead of a long line.
                let depth = rng.pick(&[10usize, 200, 2000]);
                let expr = "(".repeat(depth) + "1.0" + &")".repeat(depth);
                s.extend_from_slice(format!("\nfn deep() -> f32 {{ return {expr}; }}\n").as_bytes());
            }
            5 if !s.is_empty() => {
                let i = rng.below(s.len());
                s[i] = rng.pick(b"09azAZ_{}()<>;:,.@ \n\x00\xff");
            }
            _ => {
                let n = rng.pick(&["0", "1", "4294967296", "99999999999", "-1", "65536", "1.5"]);
                s.splice(at..at, n.bytes());
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

fn wgsl_once(rng: &mut Rng, report: &mut Report) {
    let base = rng.pick(SEEDS);
    let src = if rng.chance(5) { base.to_string() } else { mutate(rng, base) };
    let Some(kernel) = report.record("compile", attempt(|| Kernel::new(&src, "main"))) else { return };
    // Tensors that fit each binding (its own dtype, at least its minimum size), one dispatch.
    let tensors: kiln_core::Result<Vec<Tensor>> = kernel
        .storage_bindings()
        .iter()
        .map(|b| {
            let dt = b.dtype.unwrap_or(DType::F32);
            let n = (b.min_bytes as usize).div_ceil(dt.size()).max(64);
            ops::zeros(&[n], dt)
        })
        .collect();
    let Some(tensors) = report.record("bind", attempt(|| tensors)) else { return };
    let uniforms = kernel.uniform_binding().map(|u| vec![3u8; (u.min_bytes as usize).max(16)]);
    let groups = [rng.pick(&[1u32, 2, 7]), 1, 1];
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let dispatched = attempt(|| {
        kernel.dispatch(&refs, uniforms.as_deref(), groups)?;
        for t in &tensors {
            t.to_bytes()?;
        }
        Ok(())
    });
    report.record("dispatch", dispatched);
}

// ---------------------------------------------------------------------------------------------
// ops: random calls with awkward shapes, dtypes, axes and scalars

const DIMS: &[usize] = &[0, 1, 1, 2, 3, 5, 7, 17, 64];
const ABSURD: &[usize] = &[1 << 40, 1 << 62, usize::MAX, (1 << 63) + 1];
const SCALARS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    -7.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    3.4e38,
    1e300,
    1e-45,
    65504.0,
    2147483648.0,
    -2147483649.0,
    4294967296.0,
    1e30,
];

fn shape(rng: &mut Rng) -> Vec<usize> {
    let rank = rng.below(5);
    let mut s: Vec<usize> = (0..rank).map(|_| rng.pick(DIMS)).collect();
    if rank > 0 && rng.chance(3) {
        let i = rng.below(rank);
        s[i] = rng.pick(ABSURD);
    }
    if rng.chance(1) {
        s = vec![1; 9]; // one past the maximum rank
    }
    s
}

fn dtype(rng: &mut Rng) -> DType {
    rng.pick(&[DType::F32, DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool])
}

fn tensor(rng: &mut Rng, shape: &[usize], dt: DType) -> kiln_core::Result<Tensor> {
    let n = kiln_core::shape::checked_numel(shape)?;
    if n > 1 << 16 {
        return ops::zeros(shape, dt);
    }
    let vals: Vec<f64> = (0..n)
        .map(|_| if rng.chance(30) { rng.pick(SCALARS) } else { (rng.below(2001) as f64 - 1000.0) / 37.0 })
        .collect();
    let t = Tensor::from_slice(&vals.iter().map(|&v| v as f32).collect::<Vec<f32>>(), shape)?;
    if dt == DType::F32 {
        Ok(t)
    } else {
        ops::cast(&t, dt)
    }
}

fn axis(rng: &mut Rng) -> isize {
    rng.pick(&[0isize, 1, -1, 2, -3, 7, isize::MIN, isize::MAX])
}

fn pair(rng: &mut Rng, big: bool) -> [usize; 2] {
    let pool: &[usize] = if big { &[0, 1, 2, 3, 1 << 31, 1 << 63, usize::MAX] } else { &[0, 1, 2, 3] };
    [rng.pick(pool), rng.pick(pool)]
}

fn ops_once(rng: &mut Rng, report: &mut Report) {
    let (sa, dt) = (shape(rng), dtype(rng));
    // Half the binary calls get the same shape, so they get past the broadcast check.
    let sb = if rng.chance(50) { sa.clone() } else { shape(rng) };
    let dtb = if rng.chance(80) { dt } else { dtype(rng) };
    let Some(a) = report.record("make a", attempt(|| tensor(rng, &sa, dt))) else { return };
    let Some(b) = report.record("make b", attempt(|| tensor(rng, &sb, dtb))) else { return };
    let s = rng.pick(SCALARS);
    let (ax, ax2) = (axis(rng), axis(rng));
    let big = rng.chance(20);
    let (k2, s2, p2, d2) = (pair(rng, big), pair(rng, big), pair(rng, big), pair(rng, big));
    let which = rng.below(35);
    let (un, bin) = (
        ops::UnaryOp::ALL[rng.below(ops::UnaryOp::ALL.len())],
        ops::BinaryOp::ALL[rng.below(ops::BinaryOp::ALL.len())],
    );
    let what =
        format!("op #{which} on {sa:?} {dt} / {sb:?} {dtb}, scalar {s}, axes {ax} {ax2}, {k2:?} {s2:?} {p2:?} {d2:?}");
    let r = attempt(|| -> kiln_core::Result<Tensor> {
        Ok(match which {
            0 => ops::unary(un, &a)?,
            1 => ops::binary(bin, &a, &b)?,
            2 => ops::binary_scalar(bin, &a, s, ax < 0)?,
            3 => ops::matmul(&a, &b)?,
            4 => [ops::sum, ops::all, ops::any][k2[1] % 3](&a, Some(&[ax]), ax2 > 0)?,
            5 => ops::var(&a, None, false, k2[0])?,
            6 => ops::argmax(&a, Some(ax), true)?,
            7 => ops::softmax(&a, ax)?,
            8 => ops::layer_norm(&a, Some(&b), None, s as f32)?,
            9 => ops::rms_norm(&a, None, s as f32)?,
            10 => ops::conv2d(&a, &b, None, s2, p2, d2, k2[0])?,
            11 => ops::max_pool2d(&a, k2, s2, p2)?,
            12 => ops::avg_pool2d(&a, k2, s2, p2)?,
            13 => ops::reshape(&a, &[ax, ax2])?,
            14 => ops::permute(&a, &[ax, ax2])?,
            15 => ops::slice(&a, ax, ax2, isize::MAX, (s.abs() as isize).max(1))?,
            16 => ops::concat(&[&a, &b, &a], ax)?,
            17 => ops::index_select(&a, ax, &b)?,
            18 => ops::gather(&a, ax, &b)?,
            19 => ops::where_(&a, &b, &a)?,
            20 => ops::full(&sa, dt, s)?,
            21 => ops::arange(s, s * 3.0, ax2 as f64, dt)?,
            22 => ops::attention(&a, &b, &b, ax > 0, Some(s as f32))?,
            // searching, sorting and sets
            23 => [ops::sort, ops::argsort][k2[1] % 2](&a, ax, ax2 > 0)?,
            24 => ops::searchsorted(&a, &b, ax > 0)?,
            25 => ops::nonzero(&a)?
                .into_iter()
                .next()
                .ok_or_else(|| kiln_core::Error::Internal("nonzero: no output".into()))?,
            26 => ops::unique_all(&a)?.inverse_indices,
            27 => ops::isin(&a, &b, ax > 0)?,
            // Scans, statistics and linear algebra (core/src/ops/scan.rs, diff.rs, linalg.rs).
            28 => [ops::cumulative_sum, ops::cumulative_prod][k2[1] % 2](&a, Some(ax), Some(dtb), ax2 > 0)?,
            29 => ops::prod(&a, Some(&[ax, ax2]), ax > 0, Some(dtb))?,
            30 => ops::std(&a, Some(&[ax]), ax2 > 0, k2[0])?,
            31 => ops::diff(&a, ax, k2[0], Some(&b), Some(&a))?,
            32 => ops::vecdot(&a, &b, ax)?,
            33 => ops::tensordot(&a, &b, &ops::TensordotAxes::Pairs(vec![ax, ax2], vec![ax2, ax]))?,
            _ => ops::cast(&a, dtb)?,
        })
    });
    if let Some(out) = report.record(&what, r) {
        // A result must be as large as its shape says, and readable.
        match out.to_bytes() {
            Ok(bytes) if bytes.len() == out.numel() * out.dtype().size() => {}
            Ok(bytes) => report.findings.push(format!("{what}: {} bytes for shape {:?}", bytes.len(), out.shape())),
            Err(e) if matches!(e.code(), ErrorCode::Internal | ErrorCode::Panic) => {
                report.findings.push(format!("{what}: read: {e}"))
            }
            Err(_) => {}
        }
    }
}
