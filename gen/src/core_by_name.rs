//! kiln-core's by-name dispatch (core/src/ops/by_name_gen.rs): one arm per plain op of the table
//! (`OpInfo::is_plain`), reading each argument from the JSON parameters or the named inputs by
//! its type. by_name.rs keeps the ops a plain call cannot express (elementwise, clip's two
//! forms, concat, tensordot, quant_from_bytes, the tuple ops written by hand). A plain op giving a
//! named tuple answers with the element the `output` parameter names.

use crate::text::header;
use kiln_core::ops::{op_table, Arg, BinaryOp, Out, Ty, UnaryOp};
use std::fmt::Write as _;

/// The expression reading `a` from an `OpCall` named `c`.
fn read(a: &Arg) -> String {
    let k = a.key;
    match a.ty {
        Ty::Tensor => format!("c.input(\"{k}\")?"),
        // Every input of the call, in order (concat's list).
        Ty::Tensors => "&c.inputs.iter().map(|(_, t)| t).collect::<Vec<_>>()".to_string(),
        Ty::OptTensor => format!("c.opt_input(\"{k}\")"),
        Ty::DType => format!("DType::parse(c.s(\"{k}\")?)?"),
        Ty::OptDType => format!("c.opt_dtype(\"{k}\")?"),
        Ty::Axis | Ty::Int => format!("c.i(\"{k}\")? as isize"),
        Ty::OptAxis => format!("c.opt_axis(\"{k}\")?"),
        Ty::Axes | Ty::NewShape => format!("&c.isizes(\"{k}\")?"),
        Ty::OptAxes => format!("c.opt_axes(\"{k}\")?.as_deref()"),
        Ty::Shape => format!("&c.sizes(\"{k}\")?"),
        Ty::Pair => format!("c.pair(\"{k}\")?"),
        Ty::Size => format!("c.n(\"{k}\")?"),
        Ty::U64 => format!("c.u64(\"{k}\")?"),
        Ty::F64 => format!("c.f(\"{k}\")?"),
        Ty::F32 => format!("c.f(\"{k}\")? as f32"),
        Ty::OptF32 => format!("c.opt_f32(\"{k}\")?"),
        Ty::Bool => format!("c.b(\"{k}\")?"),
        Ty::Format => format!("QuantFormat::parse(c.s(\"{k}\")?)?"),
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

pub(crate) fn dispatch() -> String {
    let mut s = header("//!");
    s += "//! The by-name arms of every plain op of the table (ops/table.rs): each argument read by its\n";
    s += "//! type, in the core call's order. by_name.rs holds the rest and the readers.\n\n";
    s += "use super::OpCall;\nuse crate::ops::{self, QuantFormat};\nuse crate::{DType, Result, Tensor};\n\n";
    s += "/// None: not a plain op of the table.\n";
    s += "pub(super) fn dispatch(op: &str, c: &OpCall) -> Option<Result<Tensor>> {\n";
    s += "    Some(match op {\n";
    for o in op_table().into_iter().filter(|o| o.is_plain() && !is_elementwise(o.name)) {
        let args: Vec<String> = o.args.iter().map(read).collect();
        let call = format!("ops::{}({})", o.core, args.join(", "));
        match o.outputs() {
            // One tensor per dimension: the one `output` names.
            [] if o.out == Out::PerDim => {
                let _ = writeln!(s, "        \"{}\" => (|| {call}.and_then(|outs| c.output(outs)))(),", o.name);
            }
            [] => {
                let _ = writeln!(s, "        \"{}\" => (|| {call})(),", o.name);
            }
            // A tuple: the element the `output` parameter names (the conformance manifest's rule).
            names => {
                let t = names.join(", ");
                let _ = writeln!(
                    s,
                    "        \"{}\" => (|| {call}.and_then(|{}| c.output([{t}])))(),",
                    o.name,
                    o.out_pattern()
                );
            }
        }
    }
    s += "        _ => return None,\n    })\n}\n";
    s
}

/// The ops of the elementwise tables, which by_name.rs dispatches through `UnaryOp` / `BinaryOp`
/// (with their scalar forms).
pub(crate) fn is_elementwise(name: &str) -> bool {
    UnaryOp::parse(name).is_ok() || BinaryOp::parse(name).is_ok()
}
