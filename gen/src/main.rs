//! `kiln-gen [--root DIR] [--out DIR] [--list]`: writes every surface that is generated from
//! kiln-core's tables (the op table `ops::op_table` with its typed arguments, the elementwise
//! tables `UnaryOp` / `BinaryOp`, the error table `ErrorCode` and the dtype table `DType`).
//! `make gen` writes them into the repository; `make gen-check` writes them under a temporary
//! directory and fails, naming the file, where a committed one differs. A developer tool: it is
//! not part of the shipped `kiln` binary. One module per target language.
//!
//! Two kinds of output: whole files (`FILES`), and regions of hand-written files between a line
//! containing `BEGIN GENERATED (kiln gen)` and one containing `END GENERATED (kiln gen)`
//! (`REGIONS`); the text around a region stays the file's own.

mod c;
mod core_by_name;
mod docs;
mod elixir;
mod julia;
mod python;
mod text;
mod web;

use anyhow::{bail, Context, Result};
use clap::Parser;
use kiln_core::ops::{op_table, OpInfo};
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(name = "kiln-gen", about = "Write the surfaces generated from kiln-core's tables (make gen)")]
struct Args {
    /// The repository root (the regions are read from the files there)
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Where to write (default: the root itself)
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only print the generated files' paths (relative to the root), one a line
    #[arg(long)]
    list: bool,
}

const BEGIN: &str = "BEGIN GENERATED (kiln gen)";
const END: &str = "END GENERATED (kiln gen)";

type Emit = fn() -> String;

/// Every generated whole file, relative to the root, and its emitter.
const FILES: &[(&str, Emit)] = &[
    ("core/src/ops/by_name_gen.rs", core_by_name::dispatch),
    ("ffi-c/src/status_gen.rs", c::status_gen),
    ("ffi-c/src/ops_gen.rs", c::c_ops),
    ("py/src/ops_gen.rs", python::py_ops),
    ("julia/src/ops_gen.jl", julia::julia_ops),
    ("tests/conformance/ops.json", docs::conformance_ops),
    ("tests/conformance/c_ops_gen.h", docs::c_runner_ops),
    ("web/js/ops_gen.js", web::web_ops),
];
/// Every generated region of a hand-written file, and its emitter.
const REGIONS: &[(&str, Emit)] = &[
    ("py/python/kiln/__init__.pyi", python::pyi),
    ("nif-elixir/lib/kiln.ex", elixir::elixir_ops),
    ("nif-elixir/lib/kiln/error.ex", elixir::elixir_errors),
    ("docs/ops-api.md", docs::docs_table),
    ("web/js/kiln.d.ts", web::web_dts),
];

fn main() -> Result<()> {
    let args = Args::parse();
    if args.list {
        for (f, _) in FILES.iter().chain(REGIONS) {
            println!("{f}");
        }
        return Ok(());
    }
    check_table(&op_table())?;
    let out = args.out.clone().unwrap_or_else(|| args.root.clone());
    for (path, emit) in FILES {
        write(&out.join(path), &emit())?;
    }
    for (path, emit) in REGIONS {
        let base = std::fs::read_to_string(args.root.join(path)).with_context(|| format!("reading {path}"))?;
        write(&out.join(path), &splice(path, &base, &emit())?)?;
    }
    println!("kiln-gen: {} files and {} regions written under {}", FILES.len(), REGIONS.len(), out.display());
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `base` with the lines between its BEGIN and END marker lines replaced by `region`.
fn splice(path: &str, base: &str, region: &str) -> Result<String> {
    let lines: Vec<&str> = base.split_inclusive('\n').collect();
    let b = lines.iter().position(|l| l.contains(BEGIN));
    let e = lines.iter().position(|l| l.contains(END));
    let (Some(b), Some(e)) = (b, e) else { bail!("{path}: no `{BEGIN}` / `{END}` marker lines") };
    if e < b {
        bail!("{path}: `{END}` comes before `{BEGIN}`");
    }
    Ok(lines[..=b].concat() + region + &lines[e..].concat())
}

/// The table's invariants a generated surface relies on.
fn check_table(t: &[OpInfo]) -> Result<()> {
    for o in t {
        if o.name.is_empty() || o.py().is_empty() || o.ex().is_empty() || o.jl().is_empty() {
            bail!("op table: {:?} has an empty name", o.name);
        }
        if !o.py_doc.is_empty() && !python::py_supported(o) {
            bail!(
                "op table: {:?} asks for a generated Python wrapper, which its arguments' types do not have yet",
                o.name
            );
        }
        if !o.c_doc.is_empty() && !o.is_plain() {
            bail!("op table: {:?} has a C comment but no plain C form (its C function is hand-written)", o.name);
        }
    }
    Ok(())
}
