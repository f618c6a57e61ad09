//! The C ABI: ffi-c/src/status_gen.rs (status and dtype enums) and ffi-c/src/ops_gen.rs (the
//! wrappers), whose doc comments cbindgen copies into include/kiln.h.

use crate::text::*;
use kiln_core::ops::{op_table, Arg, BinaryOp, Out, Ty, UnaryOp};
use kiln_core::{DType, ErrorCode};
use std::fmt::Write as _;

pub(crate) fn status_gen() -> String {
    let mut s = header("//!");
    s += "//! The C status and dtype enums (kiln-core's error and dtype tables) and their mappings.\n\n";
    s += "#![allow(non_camel_case_types)]\n\n";
    s += &doc("Status of every Kiln call. The numbers are stable and shared by every binding (kiln-core's error table, core/src/error.rs); new codes may be added, existing ones never change.");
    s += "#[repr(u32)]\n#[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub enum KilnStatus {\n";
    for &c in ErrorCode::ALL {
        let name = if c == ErrorCode::Ok { "KILN_OK".to_string() } else { format!("KILN_ERR_{}", c.name()) };
        s += &doc_at(c.meaning(), "    ");
        let _ = writeln!(s, "    {name} = {},", c as u32);
    }
    s += "}\n\n";
    s += &doc("Element types. The numbers are stable. Functions that take a `KilnDType` accept any 32-bit value and return KILN_ERR_INVALID_ARGUMENT for one that is not listed here.");
    s += "#[repr(u32)]\n#[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub enum KilnDType {\n";
    for d in DType::ALL {
        s += &doc_at(d.describe(), "    ");
        let _ = writeln!(s, "    KILN_{} = {},", d.name().to_ascii_uppercase(), d as u32);
    }
    s += "}\n\n";
    s += "pub(crate) fn status_of(code: kiln_core::ErrorCode) -> KilnStatus {\n    match code {\n";
    for &c in ErrorCode::ALL {
        let name = if c == ErrorCode::Ok { "KILN_OK".to_string() } else { format!("KILN_ERR_{}", c.name()) };
        let _ = writeln!(s, "        kiln_core::ErrorCode::{c:?} => KilnStatus::{name},");
    }
    s += "    }\n}\n\n";
    s += "/// The NUL-terminated name of a status value (\"UNKNOWN\" for one not in the table).\n";
    s += "pub(crate) fn status_name(status: u32) -> &'static [u8] {\n    match status {\n";
    for &c in ErrorCode::ALL {
        let _ = writeln!(s, "        {} => b\"{}\\0\",", c as u32, c.name());
    }
    s += "        _ => b\"UNKNOWN\\0\",\n    }\n}\n";
    s
}

pub(crate) fn c_ops() -> String {
    let mut s = header("//!");
    s += "//! Every plain op of kiln-core's op table with a C comment (its arguments typed in the table),\n";
    s += "//! then the elementwise ops of the unary and binary tables, one C function each (plus the\n";
    s += "//! by-name forms). Each is a pointer check and a call: the op logic lives in kiln-core.\n\n";
    s += "use crate::boundary::{call_out, opt_tensor, opt_value, slice, tensor, tensor_array};\n";
    s += "use crate::ops::{binary, call_outs, call_per_dim, opt_axes, quant_format, scalar, unary};\n";
    s += "use crate::types::{KilnStatus, KilnTensor};\nuse kiln_core::ops;\nuse std::os::raw::c_char;\n";
    s += "// The header shows `KilnDType`; Rust receives the raw value.\nuse std::primitive::u32 as KilnDType;\n";
    s += &plain_ops();
    for op in UnaryOp::ALL {
        let n = op.name();
        s += "\n";
        s += &doc(&format!(
            "Elementwise {}, same shape as `x` and its dtype unless stated ({}). `x`, `out`: non-null. {OUT_DOC}",
            op.doc_phrase(),
            unary_dtypes(op)
        ));
        let _ = writeln!(s, "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{n}(x: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {{");
        let _ = writeln!(s, "    unary(\"kiln_{n}\", x, out, ops::{n})\n}}");
    }
    s += "\n";
    s += &doc(&format!(
        "Elementwise unary op by name ({}); an unknown name is KILN_ERR_INVALID_ARGUMENT. `op`, `x`, `out`: non-null. {OUT_DOC}",
        quoted_list(UnaryOp::ALL.iter().map(|o| o.name()))
    ));
    s += "#[no_mangle]\npub unsafe extern \"C\" fn kiln_unary(op: *const c_char, x: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {\n";
    s += "    call_out(\"kiln_unary\", out, || {\n        let op = ops::UnaryOp::parse(crate::boundary::cstr(op, \"op\")?)?;\n        ops::unary(op, &*tensor(x, \"x\")?)\n    })\n}\n";
    for op in BinaryOp::ALL {
        let n = op.name();
        let gives = if op.gives_bool() {
            "Gives a bool tensor."
        } else if matches!(op, BinaryOp::Maximum | BinaryOp::Minimum) {
            "Gives a tensor of their dtype (bool: or / and)."
        } else {
            "Gives a tensor of their dtype (bool gives KILN_ERR_DTYPE_MISMATCH)."
        };
        s += "\n";
        s += &doc(&format!(
            "Elementwise {} with numpy broadcasting; the dtypes must match. {gives} `a`, `b`, `out`: non-null. {OUT_DOC}",
            op.doc_phrase()
        ));
        let _ = writeln!(s, "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{n}(a: *const KilnTensor, b: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {{");
        let _ = writeln!(s, "    binary(\"kiln_{n}\", a, b, out, ops::{n})\n}}\n");
        s += &doc(&format!(
            "kiln_{n} with a scalar right operand `s`, converted to `a`'s dtype. `a`, `out`: non-null. {OUT_DOC}"
        ));
        let _ = writeln!(s, "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{n}_scalar(a: *const KilnTensor, s: f64, out: *mut *mut KilnTensor) -> KilnStatus {{");
        let _ = writeln!(s, "    scalar(\"kiln_{n}_scalar\", a, s, out, ops::{n}_scalar)\n}}");
    }
    s += "\n";
    s += &doc(&format!(
        "Elementwise binary op by name ({}) with numpy broadcasting; an unknown name is KILN_ERR_INVALID_ARGUMENT. `op`, `a`, `b`, `out`: non-null. {OUT_DOC}",
        quoted_list(BinaryOp::ALL.iter().map(|o| o.name()))
    ));
    s += "#[no_mangle]\npub unsafe extern \"C\" fn kiln_binary(op: *const c_char, a: *const KilnTensor, b: *const KilnTensor, out: *mut *mut KilnTensor) -> KilnStatus {\n";
    s += "    call_out(\"kiln_binary\", out, || {\n        let op = ops::BinaryOp::parse(crate::boundary::cstr(op, \"op\")?)?;\n        ops::binary(op, &*tensor(a, \"a\")?, &*tensor(b, \"b\")?)\n    })\n}\n\n";
    s += &doc(&format!(
        "Binary op by name with a scalar `s` (converted to `a`'s dtype): `a OP s`, or `s OP a` when `scalar_first` is true. `op`, `a`, `out`: non-null. {OUT_DOC}"
    ));
    s += "#[no_mangle]\npub unsafe extern \"C\" fn kiln_binary_scalar(op: *const c_char, a: *const KilnTensor, s: f64, scalar_first: bool, out: *mut *mut KilnTensor) -> KilnStatus {\n";
    s += "    call_out(\"kiln_binary_scalar\", out, || {\n        let op = ops::BinaryOp::parse(crate::boundary::cstr(op, \"op\")?)?;\n        ops::binary_scalar(op, &*tensor(a, \"a\")?, s, scalar_first)\n    })\n}\n";
    s
}

/// The C parameters of `a` (`name: type`, one or two) and the expression giving kiln-core its
/// value inside the call.
fn c_arg(a: &Arg) -> (Vec<String>, String) {
    let (n, stem) = (a.name, a.c_stem);
    let one = |t: &str| vec![format!("{n}: {t}")];
    // A host array and its length: `shape` is counted by `ndim`, a list of tensors by `n`,
    // other lists by `n<name>`.
    let len = match (n, a.ty) {
        ("shape", _) => "ndim".to_string(),
        (_, Ty::Tensors) => "n".to_string(),
        _ => format!("n{n}"),
    };
    match a.ty {
        Ty::Tensor => (one("*const KilnTensor"), format!("&*tensor({n}, \"{n}\")?")),
        Ty::Tensors => (
            vec![format!("{n}: *const *const KilnTensor"), format!("{len}: usize")],
            format!("&tensor_array({n}, {len})?.iter().map(|t| &**t).collect::<Vec<_>>()"),
        ),
        Ty::OptTensor => (one("*const KilnTensor"), format!("opt_tensor({n}, \"{n}\")?.as_deref()")),
        Ty::DType => (one("KilnDType"), format!("crate::boundary::dtype({n})?")),
        Ty::OptDType => (one("*const KilnDType"), format!("crate::ops::opt_dtype({n})?")),
        Ty::Axis | Ty::Int => (one("isize"), n.to_string()),
        Ty::OptAxis => (one("*const isize"), format!("opt_value({n})")),
        Ty::Axes | Ty::NewShape => {
            (vec![format!("{n}: *const isize"), format!("{len}: usize")], format!("slice({n}, {len}, \"{n}\")?"))
        }
        Ty::OptAxes => (vec![format!("{n}: *const isize"), format!("{len}: usize")], format!("opt_axes({n}, {len})?")),
        Ty::Shape => {
            (vec![format!("{n}: *const usize"), format!("{len}: usize")], format!("slice({n}, {len}, \"{n}\")?"))
        }
        Ty::Pair => (vec![format!("{stem}_h: usize"), format!("{stem}_w: usize")], format!("[{stem}_h, {stem}_w]")),
        Ty::Size => (one("usize"), n.to_string()),
        Ty::U64 => (one("u64"), n.to_string()),
        Ty::F64 => (one("f64"), n.to_string()),
        Ty::F32 => (one("f32"), n.to_string()),
        Ty::OptF32 => (one("*const f32"), format!("opt_value({n})")),
        Ty::Bool => (one("bool"), n.to_string()),
        Ty::Format => (one("*const c_char"), format!("quant_format({n})?")),
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

/// The ownership sentence of a C function giving the named tuple `names` (one out-pointer each).
fn tuple_out_doc(names: &[&str]) -> String {
    let ptrs: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let outs: Vec<String> = names.iter().map(|n| format!("`*{n}`")).collect();
    format!(
        "{}: non-null. {} each receive a new tensor owned by the caller (free each with kiln_tensor_free); on error every one is set to NULL. Thread-safe.",
        ptrs.join(", "),
        outs.join(", ")
    )
}

/// One C function per op of the table that has a C comment: the comment, then the ownership
/// sentence every op shares (or its form for a named tuple).
fn plain_ops() -> String {
    let mut s = String::new();
    for o in op_table().into_iter().filter(|o| !o.c_doc.is_empty()) {
        let (mut params, mut call) = (Vec::new(), Vec::new());
        for a in o.args {
            let (p, c) = c_arg(a);
            params.extend(p);
            call.push(c);
        }
        s += "\n";
        let call = format!("ops::{}({})", o.core, call.join(", "));
        match o.outputs() {
            // One tensor per dimension of its one input: an array of out-pointers and its length.
            [] if o.out == Out::PerDim => {
                let [x] = o.args else { panic!("{}: one output per dimension of one input tensor", o.name) };
                s += &doc(&format!(
                    "{} `outs` and each `outs[d]`: non-null. Each `*outs[d]` is a new tensor owned by the caller (free it with kiln_tensor_free), NULL on error. Thread-safe.",
                    o.c_doc
                ));
                let _ = writeln!(
                    s,
                    "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{}({}, outs: *const *mut *mut KilnTensor, nouts: usize) -> KilnStatus {{",
                    o.name,
                    params.join(", ")
                );
                let _ =
                    writeln!(s, "    call_per_dim(\"kiln_{}\", {}, outs, nouts, ops::{})\n}}", o.name, x.name, o.core);
            }
            [] => {
                s += &doc(&format!("{} {OUT_DOC}", o.c_doc));
                let _ = writeln!(
                    s,
                    "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{}({}, out: *mut *mut KilnTensor) -> KilnStatus {{",
                    o.name,
                    params.join(", ")
                );
                let _ = writeln!(s, "    call_out(\"kiln_{}\", out, || {call})\n}}", o.name);
            }
            // A named tuple: one out-pointer per element, named after it, all set or all NULL.
            names => {
                s += &doc(&format!("{} {}", o.c_doc, tuple_out_doc(names)));
                params.extend(names.iter().map(|n| format!("{n}: *mut *mut KilnTensor")));
                let _ = writeln!(
                    s,
                    "#[no_mangle]\npub unsafe extern \"C\" fn kiln_{}({}) -> KilnStatus {{",
                    o.name,
                    params.join(", ")
                );
                let t = names.join(", ");
                let _ = writeln!(
                    s,
                    "    call_outs(\"kiln_{}\", &[{t}], || {call}.map(|{}| vec![{t}]))\n}}",
                    o.name,
                    o.out_pattern()
                );
            }
        }
    }
    s
}
