//! `kiln demo`: every op family at moderate sizes on the chosen adapter, each checked against
//! the CPU reference. Exits non-zero on any mismatch.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use kiln_core::dtype::f64_to_bytes;
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use kiln_core::reference as cpu;
use kiln_core::{DType, Tensor};
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// One row of the table: a GPU run and its CPU reference.
struct Case {
    op: String,
    shape: String,
    gpu: Box<dyn Fn() -> kiln_core::Result<Vec<f64>>>,
    cpu: Box<dyn Fn() -> Vec<f64>>,
    atol: f64,
    rtol: f64,
}

/// Deterministic inputs (SplitMix64), rounded to their dtype.
pub(crate) struct Inputs(u64);

impl Inputs {
    pub(crate) fn new(seed: u64) -> Self {
        Inputs(seed)
    }
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn values(&mut self, n: usize, lo: f64, hi: f64, dtype: DType) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let v = lo + (hi - lo) * self.next();
                if dtype.is_float() {
                    cpu::round_to(dtype, v)
                } else {
                    v.floor()
                }
            })
            .collect()
    }
    pub(crate) fn tensor(&mut self, shape: &[usize], lo: f64, hi: f64, dtype: DType) -> Result<(Tensor, Vec<f64>)> {
        let v = self.values(shape.iter().product(), lo, hi, dtype);
        Ok((Tensor::from_bytes(&f64_to_bytes(dtype, &v), shape, dtype)?, v))
    }
}

/// The dtype the demo feeds an elementwise op: the first of these the op's own dtype rule
/// (`UnaryOp::accepts` / `BinaryOp::accepts`, what the op checks) takes, so a new op with a
/// narrower rule gets inputs it accepts rather than breaking the demo.
const DEMO_DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::U32, DType::Bool];

fn demo_dtype(op: &str, accepts: impl Fn(DType) -> bool) -> Result<DType> {
    DEMO_DTYPES
        .into_iter()
        .find(|&d| accepts(d))
        .ok_or_else(|| anyhow::anyhow!("{op} takes none of the demo's dtypes {DEMO_DTYPES:?}"))
}

/// Input range of an integer or bool operand (shift counts run past 32, where the rule changes).
fn int_range(dt: DType, shift_count: bool) -> (f64, f64) {
    match (dt, shift_count) {
        (DType::Bool, _) => (0.0, 2.0),
        (_, true) => (0.0, 40.0),
        (DType::U32, _) => (0.0, 4e9),
        _ => (-2e9, 2e9),
    }
}

fn cases(inp: &mut Inputs) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let n = 1 << 16;
    for op in UnaryOp::ALL {
        let dt = demo_dtype(op.name(), |d| op.accepts(d))?;
        let (lo, hi) = match op {
            _ if !dt.is_float() => int_range(dt, false),
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log2 | UnaryOp::Log10 => (0.05, 10.0),
            UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh => (-0.99, 0.99),
            UnaryOp::Acosh => (1.0, 10.0),
            UnaryOp::Log1p => (-0.9, 5.0),
            _ => (-5.0, 5.0),
        };
        let (x, xv) = inp.tensor(&[n], lo, hi, dt)?;
        let tol = if dt.is_float() { (3e-6, 1e-5) } else { (0.0, 0.0) };
        cases.push(Case {
            op: op.name().into(),
            shape: format!("[{n}] {dt}"),
            gpu: Box::new(move || ops::unary(op, &x)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::unary(op, &xv, dt)),
            atol: tol.0,
            rtol: tol.1,
        });
    }
    for op in BinaryOp::ALL {
        let dt = demo_dtype(op.name(), |d| op.accepts(d))?;
        let (sa, sb) = (vec![256, 257], vec![257]);
        let shift = matches!(op, BinaryOp::BitwiseLeftShift | BinaryOp::BitwiseRightShift);
        let ((alo, ahi), (blo, bhi)) = if !dt.is_float() {
            (int_range(dt, false), int_range(dt, shift))
        } else if matches!(op, BinaryOp::Pow | BinaryOp::Div | BinaryOp::Remainder | BinaryOp::FloorDivide) {
            ((0.5, 3.0), (0.5, 3.0))
        } else {
            ((-5.0, 3.0), (-5.0, 3.0))
        };
        let (a, av) = inp.tensor(&sa, alo, ahi, dt)?;
        let (b, bv) = inp.tensor(&sb, blo, bhi, dt)?;
        let tol = if dt.is_float() { (1e-6, 1e-5) } else { (0.0, 0.0) };
        cases.push(Case {
            op: op.name().into(),
            shape: format!("{sa:?}x{sb:?} {dt}"),
            gpu: Box::new(move || ops::binary(op, &a, &b)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::binary(op, &av, &sa, &bv, &sb, dt).unwrap().0),
            atol: tol.0,
            rtol: tol.1,
        });
    }
    {
        let (c, cv) = inp.tensor(&[300, 301], 0.0, 2.0, DType::U32)?;
        let (a, av) = inp.tensor(&[301], -1.0, 1.0, DType::F32)?;
        let (b, bv) = inp.tensor(&[300, 1], -1.0, 1.0, DType::F32)?;
        cases.push(Case {
            op: "where".into(),
            shape: "[300,301] u32 ? [301] : [300,1]".into(),
            gpu: Box::new(move || ops::where_(&c, &a, &b)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::where_(&cv, &[300, 301], &av, &[301], &bv, &[300, 1]).unwrap().0),
            atol: 0.0,
            rtol: 0.0,
        });
        let (x, xv) = inp.tensor(&[n], -1e4, 1e4, DType::F32)?;
        cases.push(Case {
            op: "cast".into(),
            shape: format!("[{n}] f32->i32"),
            gpu: Box::new(move || ops::cast(&x, DType::I32)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::cast(&xv, DType::I32)),
            atol: 0.0,
            rtol: 0.0,
        });
        cases.push(Case {
            op: "arange".into(),
            shape: format!("[{n}] i32"),
            gpu: Box::new(move || ops::arange(5.0, 5.0 + 3.0 * n as f64, 3.0, DType::I32)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::arange(5.0, 5.0 + 3.0 * n as f64, 3.0, DType::I32)),
            atol: 0.0,
            rtol: 0.0,
        });
    }
    families(inp, &mut cases)?;
    Ok(cases)
}

/// Adds one row: `gpu` runs the op, `cpu` its reference.
fn row(
    cases: &mut Vec<Case>,
    op: &str,
    shape: String,
    tol: (f64, f64),
    gpu: impl Fn() -> kiln_core::Result<Vec<f64>> + 'static,
    cpu: impl Fn() -> Vec<f64> + 'static,
) {
    cases.push(Case { op: op.into(), shape, gpu: Box::new(gpu), cpu: Box::new(cpu), atol: tol.0, rtol: tol.1 });
}

/// Every family beyond the elementwise ops: reductions, norms, matmul, conv and pooling,
/// data movement, nn ops, random numbers and a custom kernel.
fn families(inp: &mut Inputs, cases: &mut Vec<Case>) -> Result<()> {
    let f = DType::F32;
    let red = (1e-4, 1e-5);
    // reductions over [300, 1031]
    let sh = vec![300usize, 1031];
    let (x, xv) = inp.tensor(&sh, -1.0, 1.0, f)?;
    type RefFn = fn(&[f64], &[usize], Option<&[isize]>, bool, DType) -> kiln_core::Result<(Vec<f64>, Vec<usize>)>;
    type OpFn = fn(&Tensor, Option<&[isize]>, bool) -> kiln_core::Result<Tensor>;
    let max_ref: RefFn = |x, s, a, k, _| cpu::reduce::max(x, s, a, k);
    let min_ref: RefFn = |x, s, a, k, _| cpu::reduce::min(x, s, a, k);
    let table: [(&str, OpFn, RefFn, Option<&'static [isize]>); 6] = [
        ("sum", ops::sum, cpu::reduce::sum, Some(&[-1])),
        ("sum", ops::sum, cpu::reduce::sum, None),
        ("mean", ops::mean, cpu::reduce::mean, Some(&[0])),
        ("max", ops::max, max_ref, Some(&[-1])),
        ("min", ops::min, min_ref, Some(&[0])),
        ("sum", ops::sum, cpu::reduce::sum, Some(&[0, 1])),
    ];
    for (name, op, reference, axes) in table {
        let (x, xv, sh) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            name,
            format!("{sh:?} axes {axes:?}"),
            red,
            move || op(&x, axes, false)?.to_f64_vec(),
            move || reference(&xv, &sh, axes, false, DType::F32).unwrap().0,
        );
    }
    {
        let (x1, xv1, sh1) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "var",
            format!("{sh:?} axis -1 ddof 1"),
            red,
            move || ops::var(&x1, Some(&[-1]), true, 1)?.to_f64_vec(),
            move || cpu::reduce::var(&xv1, &sh1, Some(&[-1]), true, 1, DType::F32).unwrap().0,
        );
        let (x2, xv2, sh2) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "argmax",
            format!("{sh:?} axis -1"),
            (0.0, 0.0),
            move || ops::argmax(&x2, Some(-1), false)?.to_f64_vec(),
            move || cpu::reduce::argmax(&xv2, &sh2, Some(-1), false).unwrap().0,
        );
        let (x3, xv3, sh3) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "argmin",
            format!("{sh:?} axis 0"),
            (0.0, 0.0),
            move || ops::argmin(&x3, Some(0), false)?.to_f64_vec(),
            move || cpu::reduce::argmin(&xv3, &sh3, Some(0), false).unwrap().0,
        );
    }
    // sort and searchsorted over the reduction's input (rows of 1031: past the 512-pair block)
    {
        let (x1, xv1, sh1) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "argsort",
            format!("{sh:?} axis -1"),
            (0.0, 0.0),
            move || ops::argsort(&x1, -1, false)?.to_f64_vec(),
            move || cpu::sort::argsort(&xv1, &sh1, -1, false).unwrap(),
        );
        let (x2, xv2, sh2) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "sort",
            format!("{sh:?} axis 0 descending"),
            (0.0, 0.0),
            move || ops::sort(&x2, 0, true)?.to_f64_vec(),
            move || cpu::sort::sort(&xv2, &sh2, 0, true).unwrap(),
        );
    }
    // norms over [257, 1024]
    let sh = vec![257usize, 1024];
    let (x, xv) = inp.tensor(&sh, -3.0, 3.0, f)?;
    let (w, wv) = inp.tensor(&[1024], 0.5, 1.5, f)?;
    let (b, bv) = inp.tensor(&[1024], -0.5, 0.5, f)?;
    {
        let (x, xv, sh) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "softmax",
            format!("{sh:?} axis -1"),
            (1e-6, 1e-4),
            move || ops::softmax(&x, -1)?.to_f64_vec(),
            move || cpu::norm::softmax(&xv, &sh, -1, f).unwrap().0,
        );
    }
    {
        let (x, xv, sh) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "log_softmax",
            format!("{sh:?} axis 0"),
            (1e-5, 1e-5),
            move || ops::log_softmax(&x, 0)?.to_f64_vec(),
            move || cpu::norm::log_softmax(&xv, &sh, 0, f).unwrap().0,
        );
    }
    {
        let (x, xv, sh, w, wv, b, bv) =
            (x.clone(), xv.clone(), sh.clone(), w.clone(), wv.clone(), b.clone(), bv.clone());
        row(
            cases,
            "layer_norm",
            format!("{sh:?} w b"),
            (1e-4, 1e-4),
            move || ops::layer_norm(&x, Some(&w), Some(&b), 1e-5)?.to_f64_vec(),
            move || cpu::norm::layer_norm(&xv, &sh, Some(&wv), Some(&bv), 1e-5, f).unwrap().0,
        );
    }
    {
        let (x, xv, sh, w, wv) = (x.clone(), xv.clone(), sh.clone(), w.clone(), wv.clone());
        row(
            cases,
            "rms_norm",
            format!("{sh:?} w"),
            (1e-4, 1e-4),
            move || ops::rms_norm(&x, Some(&w), 1e-6)?.to_f64_vec(),
            move || cpu::norm::rms_norm(&xv, &sh, Some(&wv), 1e-6, f).unwrap().0,
        );
    }
    {
        let bsh = vec![4usize, 16, 9, 9];
        let (x, xv) = inp.tensor(&bsh, -2.0, 2.0, f)?;
        let (m, mv) = inp.tensor(&[16], -0.5, 0.5, f)?;
        let (v, vv) = inp.tensor(&[16], 0.5, 2.0, f)?;
        row(
            cases,
            "batch_norm",
            format!("{bsh:?}"),
            (1e-5, 1e-5),
            move || ops::batch_norm(&x, &m, &v, None, None, 1e-5)?.to_f64_vec(),
            move || cpu::norm::batch_norm(&xv, &bsh, &mv, &vv, None, None, 1e-5, f).unwrap().0,
        );
    }
    // matmul: 2-D with awkward sizes, batched with broadcast, matrix-vector
    for (sa, sb) in
        [(vec![129usize, 257], vec![257usize, 67]), (vec![3, 1, 64, 33], vec![5, 33, 65]), (vec![301, 129], vec![129])]
    {
        let (a, av) = inp.tensor(&sa, -1.0, 1.0, f)?;
        let (b, bv) = inp.tensor(&sb, -1.0, 1.0, f)?;
        let label = format!("{sa:?}@{sb:?}");
        row(
            cases,
            "matmul",
            label,
            (1e-4, 1e-4),
            move || ops::matmul(&a, &b)?.to_f64_vec(),
            move || cpu::matmul::matmul(&av, &sa, &bv, &sb).unwrap().0,
        );
    }
    // conv2d and pooling
    {
        let (x, xv) = inp.tensor(&[2, 8, 31, 29], -1.0, 1.0, f)?;
        let (w, wv) = inp.tensor(&[12, 4, 3, 3], -0.5, 0.5, f)?;
        let (b, bv) = inp.tensor(&[12], -0.5, 0.5, f)?;
        row(
            cases,
            "conv2d",
            "[2,8,31,29]*[12,4,3,3] s2 p1 d1 g2".into(),
            (1e-4, 1e-4),
            move || ops::conv2d(&x, &w, Some(&b), [2, 2], [1, 1], [1, 1], 2)?.to_f64_vec(),
            move || {
                cpu::conv::conv2d(&xv, [2, 8, 31, 29], &wv, [12, 4, 3, 3], Some(&bv), [2, 2], [1, 1], [1, 1], 2)
                    .unwrap()
                    .0
            },
        );
        let (p, pv) = inp.tensor(&[2, 8, 33, 35], -1.0, 1.0, f)?;
        let (p2, pv2) = (p.clone(), pv.clone());
        row(
            cases,
            "max_pool2d",
            "[2,8,33,35] k3 s2 p1".into(),
            (0.0, 0.0),
            move || ops::max_pool2d(&p, [3, 3], [2, 2], [1, 1])?.to_f64_vec(),
            move || cpu::conv::max_pool2d(&pv, [2, 8, 33, 35], [3, 3], [2, 2], [1, 1]).unwrap().0,
        );
        row(
            cases,
            "avg_pool2d",
            "[2,8,33,35] k2 s2 p0".into(),
            (1e-6, 1e-6),
            move || ops::avg_pool2d(&p2, [2, 2], [2, 2], [0, 0])?.to_f64_vec(),
            move || cpu::conv::avg_pool2d(&pv2, [2, 8, 33, 35], [2, 2], [2, 2], [0, 0]).unwrap().0,
        );
    }
    // data movement
    {
        let sh = vec![7usize, 11, 13];
        let (x, xv) = inp.tensor(&sh, -1.0, 1.0, f)?;
        let exact = (0.0, 0.0);
        let (x1, xv1, sh1) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "permute",
            format!("{sh:?} (2,0,1)"),
            exact,
            move || ops::permute(&x1, &[2, 0, 1])?.to_f64_vec(),
            move || cpu::movement::permute(&xv1, &sh1, &[2, 0, 1]).unwrap().0,
        );
        let (x2, xv2, sh2) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "transpose",
            format!("{sh:?} (0,-1)"),
            exact,
            move || ops::transpose(&x2, 0, -1)?.to_f64_vec(),
            move || cpu::movement::permute(&xv2, &sh2, &[2, 1, 0]).unwrap().0,
        );
        let (x3, xv3, sh3) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "slice",
            format!("{sh:?} axis 1 [-9:10:3]"),
            exact,
            move || ops::slice(&x3, 1, -9, 10, 3)?.to_f64_vec(),
            move || cpu::movement::slice(&xv3, &sh3, 1, -9, 10, 3).unwrap().0,
        );
        let (y, yv) = inp.tensor(&[7, 5, 13], -1.0, 1.0, f)?;
        let (x4, xv4, sh4) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "concat",
            format!("{sh:?}+[7,5,13] axis 1"),
            exact,
            move || ops::concat(&[&x4, &y], 1)?.to_f64_vec(),
            move || cpu::movement::concat(&[(&xv4[..], &sh4[..]), (&yv[..], &[7, 5, 13][..])], 1).unwrap().0,
        );
        let idx: Vec<i32> = vec![12, 0, 5, 5, 7, 1];
        let it = Tensor::from_slice(&idx, &[idx.len()])?;
        let (x5, xv5, sh5) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "index_select",
            format!("{sh:?} axis -1, 6 indices"),
            exact,
            move || ops::index_select(&x5, -1, &it)?.to_f64_vec(),
            move || {
                cpu::movement::index_select(&xv5, &sh5, -1, &idx.iter().map(|&i| i as i64).collect::<Vec<_>>())
                    .unwrap()
                    .0
            },
        );
        let gidx: Vec<i32> = (0..7 * 11 * 4).map(|i| i * 7 % 13).collect();
        let gt = Tensor::from_slice(&gidx, &[7, 11, 4])?;
        let (x6, xv6, sh6) = (x.clone(), xv.clone(), sh.clone());
        row(
            cases,
            "gather",
            format!("{sh:?} axis 2, index [7,11,4]"),
            exact,
            move || ops::gather(&x6, 2, &gt)?.to_f64_vec(),
            move || {
                cpu::movement::gather(&xv6, &sh6, 2, &gidx.iter().map(|&i| i as i64).collect::<Vec<_>>(), &[7, 11, 4])
                    .unwrap()
            },
        );
        let x7 = x.clone();
        row(
            cases,
            "reshape",
            format!("{sh:?} -> [77, -1]"),
            exact,
            move || ops::reshape(&x7, &[77, -1])?.to_f64_vec(),
            move || xv.clone(),
        );
    }
    // nn: embedding, rope, attention
    {
        let (w, wv) = inp.tensor(&[50, 24], -1.0, 1.0, f)?;
        let ids: Vec<u32> = (0..37).map(|i| (i * 17 % 50) as u32).collect();
        let it = Tensor::from_slice(&ids, &[37])?;
        row(
            cases,
            "embedding",
            "[50,24] by 37 ids".into(),
            (0.0, 0.0),
            move || ops::embedding(&w, &it)?.to_f64_vec(),
            move || cpu::movement::embedding(&wv, 50, 24, &ids.iter().map(|&i| i as i64).collect::<Vec<_>>()),
        );
        let sh = vec![3usize, 17, 64];
        let (x, xv) = inp.tensor(&sh, -1.0, 1.0, f)?;
        row(
            cases,
            "rope",
            format!("{sh:?} offset 5"),
            (1e-5, 1e-5),
            move || ops::rope(&x, 5, 10000.0)?.to_f64_vec(),
            move || cpu::movement::rope(&xv, &sh, 5, 10000.0),
        );
        let (q, qv) = inp.tensor(&[2, 3, 70, 32], -1.0, 1.0, f)?;
        let (k, kv) = inp.tensor(&[2, 3, 90, 32], -1.0, 1.0, f)?;
        let (v, vv) = inp.tensor(&[2, 3, 90, 40], -1.0, 1.0, f)?;
        row(
            cases,
            "attention",
            "q[2,3,70,32] kv 90 causal".into(),
            (1e-5, 1e-4),
            move || ops::attention(&q, &k, &v, true, None)?.to_f64_vec(),
            move || {
                cpu::attention::attention(&qv, &[2, 3, 70, 32], &kv, &[2, 3, 90, 32], &vv, &[2, 3, 90, 40], true, None)
                    .unwrap()
                    .0
            },
        );
    }
    // random numbers: the same bits as the CPU generator
    row(
        cases,
        "random_uniform",
        "[100003] seed 7".into(),
        (0.0, 0.0),
        || ops::random_uniform(&[100003], DType::F32, 7, -2.0, 3.0)?.to_f64_vec(),
        || cpu::random::uniform(100003, DType::F32, 7, -2.0, 3.0),
    );
    // log and cos may differ by ulps across GPUs (the bits are exact; see reference::random).
    row(
        cases,
        "random_normal",
        "[100003] seed 7".into(),
        (6e-5, 1e-5),
        || ops::random_normal(&[100003], DType::F32, 7, 1.0, 2.0)?.to_f64_vec(),
        || cpu::random::normal(100003, DType::F32, 7, 1.0, 2.0),
    );
    // a custom WGSL kernel
    {
        const SRC: &str = "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
            @group(0) @binding(1) var<storage, read_write> o: array<f32>;\n\
            @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                if (g.x < arrayLength(&a)) { o[g.x] = a[g.x] * a[g.x] + 1.0; }\n}";
        let n = 10007;
        let (a, av) = inp.tensor(&[n], -2.0, 2.0, f)?;
        // GPUs may fuse a * a + 1 into one fma (one rounding instead of two).
        row(
            cases,
            "custom kernel",
            format!("[{n}] a*a+1"),
            (1e-6, 1e-6),
            move || {
                let k = kiln_core::Kernel::new(SRC, "main")?;
                let o = Tensor::empty(&[n], DType::F32)?;
                k.dispatch(&[&a, &o], None, [(n as u32).div_ceil(64), 1, 1])?;
                o.to_f64_vec()
            },
            move || av.iter().map(|&x| ((x as f32) * (x as f32) + 1.0) as f64).collect(),
        );
    }
    Ok(())
}

pub fn main(args: Args) -> Result<()> {
    let dev = kiln_core::device()?;
    println!("kiln demo on {} ({}, {})", dev.info().name, dev.info().backend, dev.info().device_type);
    let mut inp = Inputs::new(args.seed);
    let cases = cases(&mut inp)?;
    let bar = ProgressBar::new(cases.len() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}").unwrap());
    let mut rows = Vec::new();
    let mut failures = 0;
    for c in &cases {
        bar.set_message(c.op.clone());
        // Warm-up compiles the pipeline; the timed run includes the readback.
        let warm = (c.gpu)();
        let t0 = Instant::now();
        let got = warm.and_then(|_| (c.gpu)());
        let gpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t1 = Instant::now();
        let want = (c.cpu)();
        let cpu_ms = t1.elapsed().as_secs_f64() * 1e3;
        let (err, ok, note) = match got {
            Ok(got) if got.len() == want.len() => {
                let mut max_err: f64 = 0.0;
                let mut ok = true;
                for (g, w) in got.iter().zip(&want) {
                    let same = g == w || (g.is_nan() && w.is_nan());
                    let e = if same { 0.0 } else { (g - w).abs() };
                    max_err = max_err.max(if e.is_nan() { f64::INFINITY } else { e });
                    ok &= same || e <= c.atol + c.rtol * w.abs();
                }
                (max_err, ok, String::new())
            }
            Ok(got) => (f64::INFINITY, false, format!("length {} vs {}", got.len(), want.len())),
            Err(e) => (f64::INFINITY, false, e.to_string()),
        };
        if !ok {
            failures += 1;
        }
        rows.push((c.op.clone(), c.shape.clone(), gpu_ms, cpu_ms, err, ok, note));
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!("{:<20} {:<34} {:>10} {:>10} {:>10}  ok", "op", "shape", "GPU ms", "CPU ms", "max err");
    for (op, shape, g, c, e, ok, note) in &rows {
        println!("{op:<20} {shape:<34} {g:>10.3} {c:>10.3} {e:>10.2e}  {}{}", if *ok { "ok" } else { "FAIL " }, note);
    }
    println!("{} ops, {} ok, {} failed", rows.len(), rows.len() - failures, failures);
    if failures > 0 {
        anyhow::bail!("{failures} op(s) did not match the CPU reference");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every elementwise op gets a demo dtype its own rule accepts (no device needed): a new
    /// op with a narrower rule cannot make `make demo` feed it a refused dtype.
    #[test]
    fn every_elementwise_op_gets_an_accepted_dtype() {
        for op in UnaryOp::ALL {
            let dt = demo_dtype(op.name(), |d| op.accepts(d)).unwrap();
            kiln_core::ops::check_unary_dtype(op, dt).unwrap();
        }
        for op in BinaryOp::ALL {
            let dt = demo_dtype(op.name(), |d| op.accepts(d)).unwrap();
            kiln_core::ops::check_binary_dtypes(op, dt, dt).unwrap();
        }
        assert_eq!(demo_dtype("bitwise_and", |d| BinaryOp::BitwiseAnd.accepts(d)).unwrap(), DType::I32);
    }
}
