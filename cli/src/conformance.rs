//! `kiln conformance MANIFEST OUT.json`: the Rust runner of the cross-language conformance suite
//! (tests/conformance/). Runs every case of the manifest through kiln-core, checks each output
//! against the expected one within the case's tolerance and writes, per case, pass/fail and the
//! SHA-256 of the output bytes. The other languages' runners write the same JSON. Written by
//! hand: it reads the manifest and compares; every op call goes through `by_name` (generated for
//! the plain rows).

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use kiln_core::dtype::bytes_to_f64;
use kiln_core::ops::{self, by_name};
use kiln_core::{DType, Kernel, Tensor};
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

/// Whether `run_op` dispatches `op`: custom kernels here, every other op through kiln-core's
/// by-name dispatcher (shared with `kiln serve`), asked itself rather than a copy of its list.
fn dispatches(op: &str) -> bool {
    op == "kernel" || by_name::knows(op)
}

struct Case<'a> {
    p: &'a serde_json::Map<String, Value>,
    inputs: Vec<(String, Tensor)>,
    dir: &'a Path,
}

impl Case<'_> {
    fn get(&self, k: &str) -> Result<&Value> {
        self.p.get(k).with_context(|| format!("no parameter {k:?}"))
    }
    fn s(&self, k: &str) -> Result<&str> {
        self.get(k)?.as_str().with_context(|| format!("{k} is not a string"))
    }
    fn i(&self, k: &str) -> Result<i64> {
        self.get(k)?.as_i64().with_context(|| format!("{k} is not an integer"))
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
    if op != "kernel" {
        return Ok(by_name::run(op, &by_name::OpCall { params: c.p, inputs: &c.inputs })?);
    }
    let src = std::fs::read_to_string(c.dir.join(c.s("source")?))?;
    let k = Kernel::new(&src, c.s("entry")?)?;
    let wg = ints(c.get("workgroups")?).context("workgroups is not a list of integers")?;
    if wg.len() != 3 {
        bail!("workgroups must have three values");
    }
    let uniforms = match c.get("uniforms")? {
        Value::Null => None,
        v => Some(hex(v.as_str().context("uniforms")?)?),
    };
    let ts: Vec<&Tensor> = c.inputs.iter().map(|(_, t)| t).collect();
    k.dispatch(&ts, uniforms.as_deref(), [wg[0] as u32, wg[1] as u32, wg[2] as u32])?;
    let out = c.i("output")?;
    let (_, t) = usize::try_from(out).ok().and_then(|k| c.inputs.get(k)).with_context(|| format!("no input {out}"))?;
    Ok(t.clone())
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
