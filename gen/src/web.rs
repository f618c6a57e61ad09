//! JavaScript (web/): web/js/ops_gen.js and the region of web/js/kiln.d.ts.

use crate::text::*;
use kiln_core::ops::{op_table, BinaryOp, OpInfo, UnaryOp};
use kiln_core::ErrorCode;
use std::fmt::Write as _;

/// `snake_case` as JavaScript's `camelCase`.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The JavaScript name of an op: the Python binding's (numpy's) name in camelCase.
pub(crate) fn js_name(o: &OpInfo) -> String {
    camel(o.py())
}

pub(crate) fn web_ops() -> String {
    let mut s = header("//");
    s += "// The op table as the JavaScript package names it (the Python binding's names in camelCase),
";
    s += "// the error table, and one function per elementwise op; the other ops are in kiln.js.

";
    s += "import { binaryOp, unaryOp } from \"./core.js\";\n\n";
    s += "/** [code, name] of every Kiln status: the numbers are stable and shared by every binding. */\n";
    s += "export const ERROR_CODES = [\n";
    for &c in ErrorCode::ALL {
        let _ = writeln!(s, "  [{}, \"{}\"],", c as u32, c.name());
    }
    s += "];\n\n/** Every op of kiln-core's table: its core name, its JavaScript name and its family. */\n";
    s += "export const OPS = [\n";
    for o in op_table() {
        let _ = writeln!(s, "  {{ name: \"{}\", js: \"{}\", family: \"{}\" }},", o.name, js_name(&o), o.family);
    }
    s += "];\n";
    for op in UnaryOp::ALL {
        let o = op_table().into_iter().find(|o| o.name == op.name()).expect("unary op in the table");
        let _ = write!(s, "\n/** Elementwise {}. */\n", op.doc_phrase().replace("*/", "* /"));
        let _ = writeln!(s, "export const {} = (x) => unaryOp(\"{}\", x);", js_name(&o), op.name());
    }
    for op in BinaryOp::ALL {
        let o = op_table().into_iter().find(|o| o.name == op.name()).expect("binary op in the table");
        let what = if op.is_comparison() { " as a u32 0/1 tensor" } else { "" };
        let _ = write!(
            s,
            "\n/** Elementwise {}{what}, with numpy broadcasting; either side may be a number. */\n",
            op.doc_phrase().replace("*/", "* /")
        );
        let _ = writeln!(s, "export const {} = (a, b) => binaryOp(\"{}\", a, b);", js_name(&o), op.name());
    }
    s
}

pub(crate) fn web_dts() -> String {
    let mut s = String::from("// elementwise ops of kiln-core's tables (comparisons give u32 0/1)\n");
    for o in op_table() {
        match o.family {
            "unary" => {
                let _ = writeln!(s, "export function {}(x: Tensor): Tensor;", js_name(&o));
            }
            "binary" | "compare" => {
                let _ = writeln!(s, "export function {}(a: Operand, b: Operand): Tensor;", js_name(&o));
            }
            _ => {}
        }
    }
    s
}
