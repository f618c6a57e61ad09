//! Julia: julia/src/ops_gen.jl.

use crate::text::*;
use kiln_core::ops::{BinaryOp, UnaryOp};
use std::fmt::Write as _;

pub(crate) fn jl_symbol(name: &str) -> String {
    if name == "==" {
        ":(==)".into()
    } else {
        format!(":{name}")
    }
}

pub(crate) fn julia_ops() -> String {
    let mut s = header("#");
    s += "# The elementwise ops of kiln-core's tables as Julia broadcasts them: (Julia function, core op).\n";
    s += "# Ops marked hand-written in the table (`/`, `^`) are defined in Kiln.jl itself.\n\n";
    let unary: Vec<UnaryOp> = UnaryOp::ALL.into_iter().filter(|o| !o.binding_names()[2].starts_with('~')).collect();
    s += "const UNARY = (\n";
    for op in &unary {
        let _ = writeln!(s, "    ({}, \"{}\"),", jl_symbol(op.binding_names()[2]), op.name());
    }
    s += ")\n\n# The unary ops that need a float array (integer arrays are converted to Float32 first).\n";
    s += "const FLOAT_ONLY = (";
    s += &quoted_list(unary.iter().filter(|o| !o.allows_int()).map(|o| o.name()));
    s += ")\n\nconst BINARY = (\n";
    for op in BinaryOp::ALL.into_iter().filter(|o| !o.binding_names()[2].starts_with('~')) {
        let _ = writeln!(s, "    ({}, \"{}\"),", jl_symbol(op.binding_names()[2]), op.name());
    }
    s += ")\n";
    s
}
