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
    use super::parse_workgroups;

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
