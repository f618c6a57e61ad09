//! `kiln-gen [--root DIR] [--out DIR] [--list]`: writes every surface that is generated from
//! kiln-core's tables (the op table `ops::op_table` with its typed arguments, the elementwise
//! tables `UnaryOp` / `BinaryOp`, the error table `ErrorCode` and the dtype table `DType`).
//! `make gen` writes them into the repository; `make gen-check` writes them under a temporary
//! directory and fails, naming the file, where a committed one differs. A developer tool: it is
//! not part of the shipped `kiln` binary. One module per target language.
//!
//! Two kinds of output: whole files (`FILES`), and regions of hand-written files between a line
//! containing `BEGIN GENERATED (kiln gen)` and one containing `END GENERATED (kiln gen)`
//! (`REGIONS`; a file's n-th marker pair is its n-th entry there); the text around a region stays
//! the file's own.
//!
//! It also checks what the bindings restate in their own idiom instead (mirrors.rs: the session
//! limits' fields in each restatement that is not generated).

mod c;
mod core_by_name;
mod docs;
mod elixir;
mod julia;
mod mirrors;
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
    ("julia/src/ccall_gen.jl", julia::julia_ccalls),
    ("julia/src/methods_gen.jl", julia::julia_methods),
    ("nif-elixir/native/src/ops_gen.rs", elixir::nif_ops),
    ("nif-elixir/native/src/session_gen.rs", elixir::nif_session),
    ("tests/conformance/ops.json", docs::conformance_ops),
    ("tests/conformance/c_ops_gen.h", docs::c_runner_ops),
    ("web/js/ops_gen.js", web::web_ops),
    ("web/src/ops_gen.rs", web::wasm_ops),
];
/// Every generated region of a hand-written file, and its emitter.
const REGIONS: &[(&str, Emit)] = &[
    ("py/python/kiln/__init__.pyi", python::pyi),
    ("nif-elixir/lib/kiln.ex", elixir::elixir_ops),
    ("nif-elixir/lib/kiln.ex", elixir::elixir_dtypes),
    ("nif-elixir/lib/kiln.ex", elixir::elixir_fns),
    ("nif-elixir/lib/kiln/native.ex", elixir::native_nifs),
    ("nif-elixir/lib/kiln/session.ex", elixir::session_limits),
    ("tests/conformance/ex_runner.exs", elixir::ex_runner),
    ("nif-elixir/lib/kiln/error.ex", elixir::elixir_errors),
    ("docs/ops-api.md", docs::docs_table),
    ("web/js/kiln.d.ts", web::web_dts),
    ("web/test/conformance.js", web::web_runner),
    ("tests/conformance/jl_runner.jl", julia::jl_exposed),
    ("tests/conformance/jl_runner.jl", julia::jl_runner),
    ("tests/conformance/FORMAT.md", docs::format_table),
];

fn main() -> Result<()> {
    let args = Args::parse();
    if args.list {
        let mut listed: Vec<&str> = Vec::new();
        for (f, _) in FILES.iter().chain(REGIONS) {
            if !listed.contains(f) {
                listed.push(f);
                println!("{f}");
            }
        }
        return Ok(());
    }
    check_table(&op_table())?;
    mirrors::check(&args.root)?;
    let out = args.out.clone().unwrap_or_else(|| args.root.clone());
    for (path, emit) in FILES {
        write(&out.join(path), &emit())?;
    }
    // A file may hold several regions: the n-th marker pair takes the file's n-th entry.
    let mut done: Vec<&str> = Vec::new();
    for (path, _) in REGIONS {
        if done.contains(path) {
            continue;
        }
        done.push(path);
        let mut text = std::fs::read_to_string(args.root.join(path)).with_context(|| format!("reading {path}"))?;
        for (i, (_, emit)) in REGIONS.iter().filter(|(p, _)| p == path).enumerate() {
            text = splice(path, &text, i, &emit())?;
        }
        write(&out.join(path), &text)?;
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

/// `base` with the lines between its `n`-th BEGIN and END marker lines replaced by `region`.
fn splice(path: &str, base: &str, n: usize, region: &str) -> Result<String> {
    let lines: Vec<&str> = base.split_inclusive('\n').collect();
    let begins: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(BEGIN)).collect();
    let ends: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(END)).collect();
    let (Some(&b), Some(&e)) = (begins.get(n), ends.get(n)) else {
        bail!("{path}: no marker pair number {} (`{BEGIN}` / `{END}` lines)", n + 1)
    };
    if e < b || begins.get(n + 1).is_some_and(|&b2| b2 < e) {
        bail!("{path}: the marker lines of region {} are not in order", n + 1);
    }
    Ok(lines[..=b].concat() + region + &lines[e..].concat())
}

/// The table's invariants a generated surface relies on.
fn check_table(t: &[OpInfo]) -> Result<()> {
    for o in t {
        if o.name.is_empty() || o.py().is_empty() || o.ex().is_empty() || o.jl().is_empty() {
            bail!("op table: {:?} has an empty name", o.name);
        }
        if !o.py_doc.is_empty() && !o.py_creation && !python::py_supported(o) {
            bail!(
                "op table: {:?} asks for a generated Python wrapper, which its arguments' types do not have yet",
                o.name
            );
        }
        if !o.hand_written(1) && !elixir::ex_supported(o) && !crate::core_by_name::is_elementwise(o.name) {
            bail!("op table: {:?} asks for a generated Elixir function, which its arguments do not allow", o.name);
        }
        if !o.c_doc.is_empty() && !o.is_plain() {
            bail!("op table: {:?} has a C comment but no plain C form (its C function is hand-written)", o.name);
        }
    }
    // The emitters' own lists of ops name plain ops of the table (a renamed or removed op, or a
    // typo, would silently drop its surface).
    for (list, names) in web::op_lists().into_iter().chain(julia::op_lists()) {
        for n in names {
            match t.iter().find(|o| o.name == n) {
                None => bail!("{list}: {n:?} is not an op of the table"),
                Some(o) if !o.is_plain() => bail!("{list}: {n:?} is not a plain op (its surface is hand-written)"),
                Some(_) => {}
            }
        }
    }
    if let Some((op, why)) = julia::jl_method_unsupported() {
        bail!("op table: {op:?} asks for a generated Julia method, which the Julia form cannot write: {why}");
    }
    if let Some((op, ty)) = julia::jl_row_form_unsupported() {
        bail!("gen/src/julia.rs JL_ROW_FORM: {op:?} has an argument of type {ty:?}, which the Julia row form does not translate");
    }
    Ok(())
}
