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

fn cases(inp: &mut Inputs) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let n = 1 << 16;
    for op in UnaryOp::ALL {
        let (lo, hi) = match op {
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => (0.05, 10.0),
            _ => (-5.0, 5.0),
        };
        let (x, xv) = inp.tensor(&[n], lo, hi, DType::F32)?;
        cases.push(Case {
            op: op.name().into(),
            shape: format!("[{n}] f32"),
            gpu: Box::new(move || ops::unary(op, &x)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::unary(op, &xv, DType::F32)),
            atol: 3e-6,
            rtol: 1e-5,
        });
    }
    for op in BinaryOp::ALL {
        let (sa, sb) = (vec![256, 257], vec![257]);
        let lo = if matches!(op, BinaryOp::Pow | BinaryOp::Div) { 0.5 } else { -5.0 };
        let (a, av) = inp.tensor(&sa, lo, 3.0, DType::F32)?;
        let (b, bv) = inp.tensor(&sb, lo, 3.0, DType::F32)?;
        cases.push(Case {
            op: op.name().into(),
            shape: format!("{sa:?}x{sb:?} f32"),
            gpu: Box::new(move || ops::binary(op, &a, &b)?.to_f64_vec()),
            cpu: Box::new(move || cpu::elementwise::binary(op, &av, &sa, &bv, &sb, DType::F32).unwrap().0),
            atol: 1e-6,
            rtol: 1e-5,
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
    Ok(cases)
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
    println!("{:<14} {:<34} {:>10} {:>10} {:>10}  {}", "op", "shape", "GPU ms", "CPU ms", "max err", "ok");
    for (op, shape, g, c, e, ok, note) in &rows {
        println!("{op:<14} {shape:<34} {g:>10.3} {c:>10.3} {e:>10.2e}  {}{}", if *ok { "ok" } else { "FAIL " }, note);
    }
    println!("{} ops, {} ok, {} failed", rows.len(), rows.len() - failures, failures);
    if failures > 0 {
        anyhow::bail!("{failures} op(s) did not match the CPU reference");
    }
    Ok(())
}
