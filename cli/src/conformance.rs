//! `kiln conformance MANIFEST OUT.json`: the Rust runner of the cross-language conformance suite
//! (tests/conformance/). Runs every case of the manifest through kiln-core, checks each output
//! against the expected one within the case's tolerance and writes, per case, pass/fail and the
//! SHA-256 of the output bytes. The other languages' runners write the same JSON.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use kiln_core::dtype::bytes_to_f64;
use kiln_core::ops::QuantFormat;
use kiln_core::{ops, DType, Kernel, Tensor};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(ClapArgs)]
pub struct Args {
    /// tests/conformance/out/manifest.json (made by tests/conformance/gen.py)
    pub manifest: PathBuf,
    /// Where to write the results (JSON)
    pub out: PathBuf,
}

/// What `run_op` says for an op it has no mapping for (the exposure check looks for it).
#[derive(Debug)]
struct Unmapped(String);

impl std::fmt::Display for Unmapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the Rust runner has no mapping for op {:?}", self.0)
    }
}

impl std::error::Error for Unmapped {}

/// Whether `run_op` dispatches `op`: it is asked with an empty case, which every mapped op
/// refuses for a missing input or parameter before it reaches the GPU, and an unmapped one
/// refuses with [`Unmapped`]. So the exposure check reads the dispatch itself, not a copy of it.
fn dispatches(op: &str) -> bool {
    let p = serde_json::Map::new();
    let c = Case { p: &p, inputs: Vec::new(), dir: Path::new(".") };
    match run_op(op, &c) {
        Ok(_) => true,
        Err(e) => e.downcast_ref::<Unmapped>().is_none(),
    }
}

struct Case<'a> {
    p: &'a serde_json::Map<String, Value>,
    inputs: Vec<(String, Tensor)>,
    dir: &'a Path,
}

impl Case<'_> {
    fn input(&self, name: &str) -> Result<&Tensor> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t).with_context(|| format!("no input {name:?}"))
    }
    fn opt_input(&self, name: &str) -> Option<&Tensor> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
    fn get(&self, k: &str) -> Result<&Value> {
        self.p.get(k).with_context(|| format!("no parameter {k:?}"))
    }
    fn f(&self, k: &str) -> Result<f64> {
        self.get(k)?.as_f64().with_context(|| format!("{k} is not a number"))
    }
    fn i(&self, k: &str) -> Result<i64> {
        self.get(k)?.as_i64().with_context(|| format!("{k} is not an integer"))
    }
    fn u64(&self, k: &str) -> Result<u64> {
        self.get(k)?.as_u64().with_context(|| format!("{k} is not an unsigned integer"))
    }
    fn b(&self, k: &str) -> Result<bool> {
        self.get(k)?.as_bool().with_context(|| format!("{k} is not a bool"))
    }
    fn s(&self, k: &str) -> Result<&str> {
        self.get(k)?.as_str().with_context(|| format!("{k} is not a string"))
    }
    fn opt_ints(&self, k: &str) -> Result<Option<Vec<i64>>> {
        match self.get(k)? {
            Value::Null => Ok(None),
            v => Ok(Some(ints(v).with_context(|| format!("{k} is not a list of integers"))?)),
        }
    }
    fn ints(&self, k: &str) -> Result<Vec<i64>> {
        self.opt_ints(k)?.with_context(|| format!("{k} is null"))
    }
    fn pair(&self, k: &str) -> Result<[usize; 2]> {
        let v = self.ints(k)?;
        if v.len() != 2 {
            bail!("{k} must have two values");
        }
        Ok([v[0] as usize, v[1] as usize])
    }
    fn shape(&self) -> Result<Vec<usize>> {
        Ok(self.ints("shape")?.into_iter().map(|d| d as usize).collect())
    }
    fn dtype(&self) -> Result<DType> {
        Ok(DType::parse(self.s("dtype")?)?)
    }
}

fn ints(v: &Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(|x| x.as_i64()).collect()
}

fn load(dir: &Path, spec: &Value) -> Result<(DType, Vec<usize>, Vec<u8>)> {
    let dt = DType::parse(spec["dtype"].as_str().context("dtype")?)?;
    let shape: Vec<usize> = ints(&spec["shape"]).context("shape")?.into_iter().map(|d| d as usize).collect();
    let file = spec["file"].as_str().context("file")?;
    let bytes = std::fs::read(dir.join(file)).with_context(|| format!("reading {file}"))?;
    Ok((dt, shape, bytes))
}

fn run_op(op: &str, c: &Case) -> Result<Tensor> {
    use ops::{BinaryOp, UnaryOp};
    let t = match op {
        "zeros" => ops::zeros(&c.shape()?, c.dtype()?)?,
        "ones" => ops::ones(&c.shape()?, c.dtype()?)?,
        "full" => ops::full(&c.shape()?, c.dtype()?, c.f("value")?)?,
        "arange" => ops::arange(c.f("start")?, c.f("stop")?, c.f("step")?, c.dtype()?)?,
        "random_uniform" => ops::random_uniform(&c.shape()?, c.dtype()?, c.u64("seed")?, c.f("low")?, c.f("high")?)?,
        "random_normal" => ops::random_normal(&c.shape()?, c.dtype()?, c.u64("seed")?, c.f("mean")?, c.f("std")?)?,
        "where" => ops::where_(c.input("cond")?, c.input("a")?, c.input("b")?)?,
        "clip" if c.inputs.len() == 3 => ops::clip(c.input("x")?, Some(c.input("min")?), Some(c.input("max")?))?,
        "clip" => ops::clip_scalar(c.input("x")?, c.f("min")?, c.f("max")?)?,
        "cast" => ops::cast(c.input("x")?, c.dtype()?)?,
        "matmul" => ops::matmul(c.input("a")?, c.input("b")?)?,
        "sum" | "mean" | "max" | "min" | "all" | "any" => {
            let f = match op {
                "sum" => ops::sum,
                "mean" => ops::mean,
                "max" => ops::max,
                "all" => ops::all,
                "any" => ops::any,
                _ => ops::min,
            };
            let axes: Option<Vec<isize>> = c.opt_ints("axes")?.map(|v| v.into_iter().map(|a| a as isize).collect());
            f(c.input("x")?, axes.as_deref(), c.b("keepdims")?)?
        }
        "var" => {
            let axes: Option<Vec<isize>> = c.opt_ints("axes")?.map(|v| v.into_iter().map(|a| a as isize).collect());
            ops::var(c.input("x")?, axes.as_deref(), c.b("keepdims")?, c.i("ddof")? as usize)?
        }
        "argmax" | "argmin" => {
            let axis = match c.get("axis")? {
                Value::Null => None,
                v => Some(v.as_i64().context("axis")? as isize),
            };
            let f = if op == "argmax" { ops::argmax } else { ops::argmin };
            f(c.input("x")?, axis, c.b("keepdims")?)?
        }
        "vecdot" => ops::vecdot(c.input("a")?, c.input("b")?, c.i("axis")? as isize)?,
        "tensordot" => {
            let n = c.i("n")?;
            let axes = if n >= 0 {
                ops::TensordotAxes::Count(n as usize)
            } else {
                let list = |k: &str| -> Result<Vec<isize>> {
                    Ok(c.opt_ints(k)?.unwrap_or_default().into_iter().map(|a| a as isize).collect())
                };
                ops::TensordotAxes::Pairs(list("axes1")?, list("axes2")?)
            };
            ops::tensordot(c.input("a")?, c.input("b")?, &axes)?
        }
        "diff" => ops::diff(
            c.input("x")?,
            c.i("axis")? as isize,
            c.i("n")? as usize,
            c.opt_input("prepend"),
            c.opt_input("append"),
        )?,
        "prod" => {
            let axes: Option<Vec<isize>> = c.opt_ints("axes")?.map(|v| v.into_iter().map(|a| a as isize).collect());
            let dtype = match c.get("dtype")? {
                Value::Null => None,
                v => Some(DType::parse(v.as_str().context("dtype")?)?),
            };
            ops::prod(c.input("x")?, axes.as_deref(), c.b("keepdims")?, dtype)?
        }
        "std" => {
            let axes: Option<Vec<isize>> = c.opt_ints("axes")?.map(|v| v.into_iter().map(|a| a as isize).collect());
            ops::std(c.input("x")?, axes.as_deref(), c.b("keepdims")?, c.i("ddof")? as usize)?
        }
        "cumulative_sum" | "cumulative_prod" => {
            let axis = match c.get("axis")? {
                Value::Null => None,
                v => Some(v.as_i64().context("axis")? as isize),
            };
            let dtype = match c.get("dtype")? {
                Value::Null => None,
                v => Some(DType::parse(v.as_str().context("dtype")?)?),
            };
            let f = if op == "cumulative_sum" { ops::cumulative_sum } else { ops::cumulative_prod };
            f(c.input("x")?, axis, dtype, c.b("include_initial")?)?
        }
        "softmax" => ops::softmax(c.input("x")?, c.i("axis")? as isize)?,
        "log_softmax" => ops::log_softmax(c.input("x")?, c.i("axis")? as isize)?,
        "layer_norm" => ops::layer_norm(c.input("x")?, c.opt_input("weight"), c.opt_input("bias"), c.f("eps")? as f32)?,
        "rms_norm" => ops::rms_norm(c.input("x")?, c.opt_input("weight"), c.f("eps")? as f32)?,
        "batch_norm" => ops::batch_norm(
            c.input("x")?,
            c.input("mean")?,
            c.input("var")?,
            c.opt_input("weight"),
            c.opt_input("bias"),
            c.f("eps")? as f32,
        )?,
        "conv2d" => ops::conv2d(
            c.input("x")?,
            c.input("w")?,
            c.opt_input("bias"),
            c.pair("stride")?,
            c.pair("padding")?,
            c.pair("dilation")?,
            c.i("groups")? as usize,
        )?,
        "max_pool2d" => ops::max_pool2d(c.input("x")?, c.pair("kernel")?, c.pair("stride")?, c.pair("padding")?)?,
        "avg_pool2d" => ops::avg_pool2d(c.input("x")?, c.pair("kernel")?, c.pair("stride")?, c.pair("padding")?)?,
        "reshape" => {
            let s: Vec<isize> = c.ints("shape")?.into_iter().map(|d| d as isize).collect();
            ops::reshape(c.input("x")?, &s)?
        }
        "permute" => {
            let a: Vec<isize> = c.ints("axes")?.into_iter().map(|d| d as isize).collect();
            ops::permute(c.input("x")?, &a)?
        }
        "transpose" => ops::transpose(c.input("x")?, c.i("axis0")? as isize, c.i("axis1")? as isize)?,
        "concat" => {
            let ts: Vec<&Tensor> = c.inputs.iter().map(|(_, t)| t).collect();
            ops::concat(&ts, c.i("axis")? as isize)?
        }
        "slice" => ops::slice(
            c.input("x")?,
            c.i("axis")? as isize,
            c.i("start")? as isize,
            c.i("stop")? as isize,
            c.i("step")? as isize,
        )?,
        "index_select" => ops::index_select(c.input("x")?, c.i("axis")? as isize, c.input("indices")?)?,
        "gather" => ops::gather(c.input("x")?, c.i("axis")? as isize, c.input("index")?)?,
        "embedding" => ops::embedding(c.input("weight")?, c.input("ids")?)?,
        "rope" => ops::rope(c.input("x")?, c.i("pos_offset")? as usize, c.f("base")? as f32)?,
        "attention" => {
            let scale = match c.get("scale")? {
                Value::Null => None,
                v => Some(v.as_f64().context("scale")? as f32),
            };
            ops::attention(c.input("q")?, c.input("k")?, c.input("v")?, c.b("causal")?, scale)?
        }
        "quant_from_bytes" => {
            let data = c.input("data")?;
            let mut bytes = data.to_bytes()?;
            bytes.truncate(c.i("nbytes")? as usize);
            let f = QuantFormat::parse(c.s("format")?)?;
            ops::quant_from_bytes(data.device(), &bytes, f, c.i("rows")? as usize, c.i("cols")? as usize)?
        }
        "quantize" => ops::quantize(c.input("x")?, QuantFormat::parse(c.s("format")?)?)?,
        "dequantize" => ops::dequantize(
            c.input("w")?,
            QuantFormat::parse(c.s("format")?)?,
            c.i("rows")? as usize,
            c.i("cols")? as usize,
        )?,
        "quant_matmul" => {
            ops::quant_matmul(c.input("x")?, c.input("w")?, QuantFormat::parse(c.s("format")?)?, c.i("n")? as usize)?
        }
        "quant_embedding" => ops::quant_embedding(
            c.input("w")?,
            QuantFormat::parse(c.s("format")?)?,
            c.i("d")? as usize,
            c.input("ids")?,
        )?,
        // Searching, sorting and sets; ops giving a tuple name the element with `output`.
        "sort" => ops::sort(c.input("x")?, c.i("axis")? as isize, c.b("descending")?)?,
        "argsort" => ops::argsort(c.input("x")?, c.i("axis")? as isize, c.b("descending")?)?,
        "searchsorted" => ops::searchsorted(c.input("x1")?, c.input("x2")?, c.b("right")?)?,
        "count_nonzero" => {
            let axes: Option<Vec<isize>> = c.opt_ints("axes")?.map(|v| v.into_iter().map(|a| a as isize).collect());
            ops::count_nonzero(c.input("x")?, axes.as_deref(), c.b("keepdims")?)?
        }
        "nonzero" | "unique_all" | "unique_counts" | "unique_inverse" => {
            let x = c.input("x")?;
            let k = c.i("output")? as usize;
            let outs = match op {
                "nonzero" => ops::nonzero(x)?,
                "unique_all" => {
                    let u = ops::unique_all(x)?;
                    vec![u.values, u.indices, u.inverse_indices, u.counts]
                }
                "unique_counts" => {
                    let (v, n) = ops::unique_counts(x)?;
                    vec![v, n]
                }
                _ => {
                    let (v, i) = ops::unique_inverse(x)?;
                    vec![v, i]
                }
            };
            outs.into_iter().nth(k).with_context(|| format!("{op} has no output {k}"))?
        }
        "unique_values" => ops::unique_values(c.input("x")?)?,
        "isin" => ops::isin(c.input("x1")?, c.input("x2")?, c.b("invert")?)?,
        "kernel" => {
            let src = std::fs::read_to_string(c.dir.join(c.s("source")?))?;
            let k = Kernel::new(&src, c.s("entry")?)?;
            let wg = c.ints("workgroups")?;
            let uniforms = match c.get("uniforms")? {
                Value::Null => None,
                v => Some(hex(v.as_str().context("uniforms")?)?),
            };
            let ts: Vec<&Tensor> = c.inputs.iter().map(|(_, t)| t).collect();
            k.dispatch(&ts, uniforms.as_deref(), [wg[0] as u32, wg[1] as u32, wg[2] as u32])?;
            c.inputs[c.i("output")? as usize].1.clone()
        }
        _ => {
            if let Ok(u) = UnaryOp::parse(op) {
                ops::unary(u, c.input("x")?)?
            } else if let Ok(b) = BinaryOp::parse(op) {
                match c.p.get("scalar") {
                    Some(s) => {
                        ops::binary_scalar(b, c.input("a")?, s.as_f64().context("scalar")?, c.b("scalar_first")?)?
                    }
                    None => ops::binary(b, c.input("a")?, c.input("b")?)?,
                }
            } else {
                return Err(Unmapped(op.to_string()).into());
            }
        }
    };
    Ok(t)
}

fn hex(s: &str) -> Result<Vec<u8>> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).context("bad hex")).collect()
}

/// Compares `got` with `want` (both in the expected dtype): |g - w| <= atol + rtol |w|, NaN
/// equal to NaN, infinities equal to themselves, and a zero only to a zero of the same sign.
fn check(dt: DType, got: &[u8], want: &[u8], atol: f64, rtol: f64) -> Option<String> {
    let (g, w) = (bytes_to_f64(dt, got), bytes_to_f64(dt, want));
    let mut bad = 0;
    let mut first = None;
    for (i, (&g, &w)) in g.iter().zip(&w).enumerate() {
        let ok = if g == 0.0 && w == 0.0 {
            g.is_sign_negative() == w.is_sign_negative()
        } else {
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs()
        };
        if !ok {
            bad += 1;
            first.get_or_insert(format!("element {i}: got {g}, expected {w}"));
        }
    }
    first.map(|f| format!("{bad} of {} elements outside atol {atol} rtol {rtol}; first: {f}", w.len()))
}

pub fn sha256_hex(data: &[u8]) -> String {
    sha256(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// FIPS 180-4 SHA-256 (no crate for it in the workspace; checked against hashlib by compare.py
/// through the digests every runner writes).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, v) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

fn run_case(dir: &Path, case: &Value) -> Result<(String, String, String)> {
    let op = case["op"].as_str().context("op")?;
    let p = case["params"].as_object().context("params")?;
    let mut inputs = Vec::new();
    for spec in case["inputs"].as_array().context("inputs")? {
        let (dt, shape, bytes) = load(dir, spec)?;
        inputs.push((spec["name"].as_str().context("name")?.to_string(), Tensor::from_bytes(&bytes, &shape, dt)?));
    }
    let c = Case { p, inputs, dir };
    let (edt, eshape, want) = load(dir, &case["expected"])?;
    let y = match run_op(op, &c) {
        Ok(y) => y,
        Err(e) => return Ok(("error".into(), String::new(), format!("{e:#}"))),
    };
    let got = y.to_bytes()?;
    let digest = sha256_hex(&got);
    if y.dtype() != edt || y.shape() != eshape.as_slice() {
        let msg = format!("output {} {:?}, expected {} {:?}", y.dtype(), y.shape(), edt, eshape);
        return Ok(("fail".into(), digest, msg));
    }
    let (atol, rtol) = (case["atol"].as_f64().unwrap_or(0.0), case["rtol"].as_f64().unwrap_or(0.0));
    Ok(match check(edt, &got, &want, atol, rtol) {
        None => ("pass".into(), digest, String::new()),
        Some(m) => ("fail".into(), digest, m),
    })
}

pub fn main(args: Args) -> Result<()> {
    let text =
        std::fs::read_to_string(&args.manifest).with_context(|| format!("reading {}", args.manifest.display()))?;
    let m: Value = serde_json::from_str(&text)?;
    let dir = args.manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
    // Exposure: every op of kiln-core's op table (and of the manifest) needs a mapping here.
    let mut wanted: Vec<String> = ops::op_names().iter().map(|s| s.to_string()).collect();
    for v in m["ops"].as_array().into_iter().flatten().chain(m["extra_ops"].as_array().into_iter().flatten()) {
        if let Some(s) = v.as_str() {
            if !wanted.iter().any(|w| w == s) {
                wanted.push(s.to_string());
            }
        }
    }
    let missing: Vec<String> = wanted.iter().filter(|o| !dispatches(o)).cloned().collect();
    let mut results = Vec::new();
    let (mut pass, mut total) = (0, 0);
    let mut per_op: HashMap<String, usize> = HashMap::new();
    for case in m["cases"].as_array().context("cases")? {
        let id = case["id"].as_str().context("id")?;
        let op = case["op"].as_str().context("op")?;
        *per_op.entry(op.to_string()).or_default() += 1;
        total += 1;
        let (status, sha, msg) = if missing.iter().any(|o| o == op) {
            ("missing".to_string(), String::new(), format!("op {op} is not exposed by the Rust runner"))
        } else {
            match std::panic::catch_unwind(|| run_case(&dir, case)) {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => ("error".into(), String::new(), format!("{e:#}")),
                Err(_) => ("error".into(), String::new(), "panic".into()),
            }
        };
        if status == "pass" {
            pass += 1;
        }
        results.push(json!({"id": id, "op": op, "status": status, "sha256": sha, "message": msg}));
    }
    let out = json!({"language": "rust", "binding": "kiln-core", "missing_ops": missing, "cases": results});
    std::fs::write(&args.out, serde_json::to_string_pretty(&out)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("conformance (rust): {pass}/{total} cases pass; results in {}", args.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exposure_check_reads_the_dispatch() {
        for op in kiln_core::ops::op_names() {
            assert!(super::dispatches(op), "run_op has no mapping for {op}");
        }
        assert!(super::dispatches("kernel"));
        assert!(!super::dispatches("no_such_op"));
    }
}
