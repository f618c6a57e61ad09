//! Python (PyO3): py/src/ops_gen.rs and the stubs' region of py/python/kiln/__init__.pyi.

use crate::text::*;
use kiln_core::ops::{BinaryOp, UnaryOp};
use std::fmt::Write as _;

/// The ops whose Python wrapper is generated (the table's name has no `~`).
pub(crate) fn py_generated() -> (Vec<UnaryOp>, Vec<BinaryOp>) {
    let u = UnaryOp::ALL.into_iter().filter(|o| !o.binding_names()[0].starts_with('~')).collect();
    let b = BinaryOp::ALL.into_iter().filter(|o| !o.binding_names()[0].starts_with('~')).collect();
    (u, b)
}

pub(crate) fn py_ops() -> String {
    let (us, bs) = py_generated();
    let mut s = header("//!");
    s += "//! The Python functions of kiln-core's unary and binary tables (numpy's names) and their\n";
    s += "//! registration; the wrappers with their own idiom (gelu's `approximate`, true division, …)\n";
    s += "//! are in ops.rs.\n\n";
    s += "use crate::ops::{binary_fns, unary_fns};\nuse pyo3::prelude::*;\n\n";
    s += "unary_fns! {\n";
    for op in &us {
        let _ = writeln!(
            s,
            "    {} => {:?}, \"Elementwise {}.\";",
            op.binding_names()[0],
            op,
            op.doc_phrase().replace('"', "'")
        );
    }
    s += "}\n\nbinary_fns! {\n";
    for op in &bs {
        let what = if op.gives_bool() { " as a bool tensor" } else { "" };
        let _ = writeln!(
            s,
            "    {} => {:?}, \"Elementwise {}{what}, with numpy broadcasting (dtypes must match; Python scalars take the tensor's dtype).\";",
            op.binding_names()[0],
            op,
            op.doc_phrase().replace('"', "'")
        );
    }
    s += "}\n\n/// Adds every function above to the module.\npub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {\n";
    for name in us.iter().map(|o| o.binding_names()[0]).chain(bs.iter().map(|o| o.binding_names()[0])) {
        let _ = writeln!(s, "    m.add_function(wrap_pyfunction!({name}, m)?)?;");
    }
    s += "    Ok(())\n}\n";
    s
}

pub(crate) fn pyi() -> String {
    let (us, bs) = py_generated();
    let mut s = String::from(
        "# unary and binary ops of kiln-core's tables (comparisons, logical ops and predicates give bool)\n",
    );
    for op in &us {
        let _ = writeln!(s, "def {}(x: ArrayLike) -> Tensor: ...", op.binding_names()[0]);
    }
    for op in &bs {
        let _ = writeln!(s, "def {}(x1: Operand, x2: Operand) -> Tensor: ...", op.binding_names()[0]);
    }
    s
}
