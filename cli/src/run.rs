//! `kiln run`: a custom kernel over .npy files. Inputs bind first (in binding order), then
//! outputs; outputs take `--output-shape/--output-dtype` or else the first input's.

use anyhow::{bail, Context, Result};
use kiln_core::{DType, Kernel, Tensor};

#[derive(clap::Args)]
pub struct Args {
    /// The WGSL source file.
    kernel: String,
    /// Entry point name.
    #[arg(long, default_value = "main")]
    entry: String,
    /// Input .npy files, bound in order to the first storage bindings.
    #[arg(long = "input")]
    inputs: Vec<String>,
    /// Output .npy files, bound after the inputs.
    #[arg(long = "output")]
    outputs: Vec<String>,
    /// Shape of each output, e.g. 4,256 (repeat per output; default: the first input's).
    #[arg(long = "output-shape")]
    output_shapes: Vec<String>,
    /// dtype of each output: f32, f16, i32, u32 (repeat per output; default: the first input's).
    #[arg(long = "output-dtype")]
    output_dtypes: Vec<String>,
    /// Uniform values in binding-struct order, each TYPE:VALUE with TYPE in f32, i32, u32.
    #[arg(long = "uniform")]
    uniforms: Vec<String>,
    /// Workgroup counts X,Y,Z (Y and Z default to 1).
    #[arg(long, default_value = "1")]
    workgroups: String,
}

fn parse_list(s: &str) -> Result<Vec<usize>> {
    if s.trim().is_empty() {
        return Ok(vec![]);
    }
    s.split(',').map(|p| p.trim().parse::<usize>().with_context(|| format!("bad number {p:?} in {s:?}"))).collect()
}

/// X[,Y[,Z]] as u32 counts: a fourth value or one past u32 is an error, never dropped or
/// truncated (`4294967296` used to become 0 and run nothing).
fn parse_workgroups(s: &str) -> Result<[u32; 3]> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        bail!("--workgroups {s:?}: give X, X,Y or X,Y,Z (at most three counts)");
    }
    let mut wg = [1u32; 3];
    for (slot, p) in wg.iter_mut().zip(&parts) {
        *slot = p
            .parse::<u32>()
            .with_context(|| format!("--workgroups {s:?}: {p:?} is not a count from 0 to {}", u32::MAX))?;
    }
    Ok(wg)
}

/// What the dispatch may leave unwritten. Kiln cannot know which elements a kernel writes (it
/// may loop, or write one element per workgroup), so this is the one honest comparison it can
/// make: the number of invocations against each output's element count. A kernel that writes
/// one element per invocation, the usual `out[gid.x] = ...`, leaves the rest at 0 (outputs start
/// zeroed) when there are fewer invocations than elements; `kiln run` used to say nothing.
fn coverage_warnings(workgroups: [u32; 3], size: [u32; 3], outputs: &[(&str, usize)]) -> Vec<String> {
    let count = |v: [u32; 3]| v.iter().map(|&x| u128::from(x)).product::<u128>();
    let invocations = count(workgroups) * count(size);
    outputs
        .iter()
        .filter(|(_, n)| (*n as u128) > invocations)
        .map(|(path, n)| {
            format!(
                "{path} has {n} elements but the dispatch runs {invocations} invocations ({} workgroups of {} = \
                 {:?} x {:?}); if the kernel writes one element per invocation, {} elements stay 0",
                count(workgroups),
                count(size),
                workgroups,
                size,
                *n as u128 - invocations
            )
        })
        .collect()
}

fn uniform_bytes(specs: &[String]) -> Result<Option<Vec<u8>>> {
    if specs.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for s in specs {
        let (ty, v) = s.split_once(':').with_context(|| format!("uniform {s:?} is not TYPE:VALUE"))?;
        match ty {
            "f32" => out.extend_from_slice(&v.parse::<f32>()?.to_le_bytes()),
            "i32" => out.extend_from_slice(&v.parse::<i32>()?.to_le_bytes()),
            "u32" => out.extend_from_slice(&v.parse::<u32>()?.to_le_bytes()),
            _ => bail!("uniform type {ty:?}: use f32, i32 or u32"),
        }
    }
    Ok(Some(out))
}

pub fn main(args: Args) -> Result<()> {
    let src = std::fs::read_to_string(&args.kernel).with_context(|| format!("reading {}", args.kernel))?;
    let kernel = Kernel::new(&src, &args.entry).map_err(|e| anyhow::anyhow!("{}: {e}", args.kernel))?;
    let inputs = args.inputs.iter().map(|p| crate::npy::read(p)).collect::<Result<Vec<_>>>()?;
    if args.output_shapes.len() > args.outputs.len() || args.output_dtypes.len() > args.outputs.len() {
        bail!("more --output-shape/--output-dtype values than --output files");
    }
    let wg = parse_workgroups(&args.workgroups)?;
    let mut outputs = Vec::new();
    for (i, _) in args.outputs.iter().enumerate() {
        let shape = match args.output_shapes.get(i) {
            Some(s) => parse_list(s)?,
            None => {
                inputs.first().map(|t| t.shape().to_vec()).context("--output-shape is needed when there is no input")?
            }
        };
        let dtype = match args.output_dtypes.get(i) {
            Some(d) => DType::parse(d)?,
            None => inputs.first().map(|t| t.dtype()).unwrap_or(DType::F32),
        };
        outputs.push(kiln_core::ops::zeros(&shape, dtype)?);
    }
    let sized: Vec<(&str, usize)> =
        args.outputs.iter().map(String::as_str).zip(outputs.iter().map(Tensor::numel)).collect();
    for w in coverage_warnings(wg, kernel.workgroup_size(), &sized) {
        eprintln!("kiln run: warning: {w}");
    }
    let all: Vec<&Tensor> = inputs.iter().chain(outputs.iter()).collect();
    let uniforms = uniform_bytes(&args.uniforms)?;
    let start = std::time::Instant::now();
    kernel.dispatch(&all, uniforms.as_deref(), wg)?;
    kiln_core::synchronize()?;
    let elapsed = start.elapsed();
    for (path, t) in args.outputs.iter().zip(&outputs) {
        crate::npy::write(path, t)?;
        println!("wrote {path}: shape {:?} {}", t.shape(), t.dtype());
    }
    println!(
        "kernel {} ran in {:.3} ms on {}",
        args.entry,
        elapsed.as_secs_f64() * 1e3,
        kiln_core::device()?.info().name
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{coverage_warnings, parse_workgroups};

    #[test]
    fn too_few_invocations_are_reported_per_output() {
        // Issue 28's case: 1 workgroup of 64 over 1000 elements left 936 zeros, silently.
        let w = coverage_warnings([1, 1, 1], [64, 1, 1], &[("out.npy", 1000), ("small.npy", 64)]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("out.npy has 1000 elements") && w[0].contains("64 invocations") && w[0].contains("936"));
        // Enough invocations, in any dimension, warns about nothing.
        assert!(coverage_warnings([4, 2, 2], [8, 4, 1], &[("o", 512)]).is_empty());
        assert!(coverage_warnings([16, 1, 1], [64, 1, 1], &[("o", 1000)]).is_empty());
        // Zero workgroups run nothing: every non-empty output is reported.
        assert_eq!(coverage_warnings([0, 1, 1], [64, 1, 1], &[("a", 1), ("b", 0)]).len(), 1);
        // The product past u64 does not overflow.
        assert!(coverage_warnings([u32::MAX; 3], [1024, 1, 1], &[("o", usize::MAX)]).is_empty());
    }

    #[test]
    fn workgroups_are_rejected_never_truncated() {
        assert_eq!(parse_workgroups("7").unwrap(), [7, 1, 1]);
        assert_eq!(parse_workgroups("1, 2,3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_workgroups("4294967295").unwrap(), [u32::MAX, 1, 1]);
        for bad in ["4294967296", "1,2,3,4", "-1", "", "1,,2", "2.5", "0x10"] {
            assert!(parse_workgroups(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
