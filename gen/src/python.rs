//! Python (PyO3): py/src/ops_gen.rs and the stubs' region of py/python/kiln/__init__.pyi.

use crate::text::*;
use kiln_core::ops::{op_table, Arg, BinaryOp, Dflt, OpInfo, Ty, UnaryOp};
use std::fmt::Write as _;

/// The ops of the op table (the elementwise tables aside) whose Python wrapper is generated:
/// a Python name without `~` (the row's `.python(docstring)`).
pub(crate) fn py_plain() -> Vec<OpInfo> {
    op_table()
        .into_iter()
        .filter(|o| !o.py_doc.is_empty() && !o.py_creation && !crate::core_by_name::is_elementwise(o.name))
        .collect()
}

/// The creation ops whose Python function is numpy's (`OpInfo::py_creation`): the function and
/// its `_like` twin (ops.rs's device helpers place the result).
fn py_creation() -> Vec<OpInfo> {
    op_table().into_iter().filter(|o| o.py_creation).collect()
}

/// numpy's creation function of `o` (a shape and a dtype, float32 by default, made on `device`)
/// and its `<name>_like` twin (the shape and by default the dtype of `x`).
fn creation_fns(o: &OpInfo) -> String {
    assert!(
        matches!(o.args, [a, b] if a.ty == Ty::Shape && b.ty == Ty::DType),
        "{}: a Python creation function takes a shape and a dtype",
        o.name
    );
    let (n, opt) = (o.name, "Option<&Bound<'_, PyAny>>");
    let mut s = format!("\n{}#[pyfunction]\n#[pyo3(signature = (shape, dtype=None, *, device=None))]\n", doc(o.py_doc));
    let _ = writeln!(s, "pub fn {n}(py: Python<'_>, shape: &Bound<'_, PyAny>, dtype: {opt}, device: {opt}) -> PyT {{");
    s += "    let target = target_device(py, device)?;\n";
    s += "    let (s, d) = (parse_shape(py, shape)?, dtype_or(py, dtype, DType::F32)?);\n";
    let _ = writeln!(s, "    place(py, gpu(py, || ops::{}(&s, d))?, target)\n}}\n", o.core);
    s += &doc(&format!("``{n}`` with the shape (and by default the dtype) of ``x``."));
    s += "#[pyfunction]\n#[pyo3(signature = (x, /, dtype=None, *, device=None))]\n";
    let _ = writeln!(s, "pub fn {n}_like(py: Python<'_>, x: &Bound<'_, PyAny>, dtype: {opt}, device: {opt}) -> PyT {{");
    s += "    let target = target_device(py, device)?;\n    let (s, d) = like_args(py, x, dtype)?;\n";
    let _ = writeln!(s, "    place(py, gpu(py, || ops::{}(&s, d))?, target)\n}}", o.core);
    s
}

/// The PyO3 parameter type of `a`, its conversion to kiln-core's value (a statement binding
/// `a.name`, or None when the parameter, named [`py_name`], is used as is) and how the call passes it. None: a type
/// the Python emitter does not write yet (kiln-gen refuses such a row).
fn py_arg(a: &Arg) -> Option<(&'static str, Option<String>, String)> {
    let (n, p) = (a.name, py_name(a));
    Some(match a.ty {
        // An int or an (h, w) pair; left out (None): the row's default, or another argument's value.
        Ty::Pair => match a.default {
            Dflt::Required => ("&Bound<'_, PyAny>", Some(format!("let {n} = parse_pair(py, \"{p}\", {p})?;")), n.into()),
            Dflt::Int(v) => {
                ("Option<&Bound<'_, PyAny>>", Some(format!("let {n} = pair_or(py, \"{p}\", {p}, {v})?;")), n.into())
            }
            Dflt::Same(other) => (
                "Option<&Bound<'_, PyAny>>",
                Some(format!(
                    "let {n} = match {p}.filter(|v| !v.is_none()) {{\n        Some(v) => parse_pair(py, \"{p}\", v)?,\n        None => {other},\n    }};"
                )),
                n.into(),
            ),
            _ => return None,
        },
        // `axis=` (an int, a sequence of ints or None) in the Array API's form: bound to `axes`.
        Ty::OptAxes => {
            ("Option<&Bound<'_, PyAny>>", Some(format!("let {n} = parse_axes(py, axis)?;")), format!("{n}.as_deref()"))
        }
        Ty::OptAxis => ("Option<Int<isize>>", None, format!("{p}.map(|v| v.0)")),
        Ty::OptDType => ("Option<&Bound<'_, PyAny>>", Some(format!("let {n} = parse_dtype(py, {p})?;")), n.to_string()),
        Ty::Tensor => ("&Bound<'_, PyAny>", Some(format!("let {n} = tensor_arg(py, {n})?;")), format!("&{n}")),
        // A sequence of ints.
        Ty::Axes => ("&Bound<'_, PyAny>", Some(format!("let {n} = axes_list(py, {p})?;")), format!("&{n}")),
        Ty::OptTensor => {
            ("Option<&Bound<'_, PyAny>>", Some(format!("let {n} = opt_tensor_arg(py, {n})?;")), format!("{n}.as_ref()"))
        }
        Ty::F32 => ("Float", None, format!("{p}.0 as f32")),
        Ty::F64 => ("Float", None, format!("{p}.0")),
        Ty::OptF32 => ("Option<Float>", None, format!("{p}.map(|v| v.0 as f32)")),
        Ty::Size => ("Int<usize>", None, format!("{p}.0")),
        Ty::Axis | Ty::Int => ("Int<isize>", None, format!("{p}.0")),
        Ty::Bool => ("bool", None, p.to_string()),
        Ty::Format => ("&str", None, format!("quant_format({p})?")),
        _ => return None,
    })
}

/// `a`'s Python name: the row's, but `axis` for a list of axes (the Array API's spelling).
pub(crate) fn py_name(a: &Arg) -> &'static str {
    if !a.py.is_empty() {
        a.py
    } else if a.ty == Ty::OptAxes {
        "axis"
    } else {
        a.name
    }
}

/// `a`'s default as a PyO3 signature writes it (a Rust expression).
fn py_default(a: &Arg) -> Option<String> {
    Some(match a.default {
        Dflt::Required => return None,
        Dflt::None => "None".into(),
        Dflt::Bool(b) => b.to_string(),
        // A pair's default is applied after the conversion (an int or a pair may be given).
        Dflt::Int(_) | Dflt::Same(_) if a.ty == Ty::Pair => "None".into(),
        Dflt::Int(i) if matches!(a.ty, Ty::F32 | Ty::F64) => format!("Float({i}.0)"),
        Dflt::Int(i) => format!("Int({i})"),
        Dflt::Float(f) => format!("Float({f:?})"),
        Dflt::Same(_) => return None,
    })
}

/// `a`'s default as the `.pyi` stub writes it.
fn pyi_default(a: &Arg) -> Option<String> {
    Some(match a.default {
        Dflt::Same(_) if a.ty == Ty::Pair => "None".into(),
        Dflt::Required | Dflt::Same(_) => return None,
        Dflt::None => "None".into(),
        Dflt::Bool(b) => if b { "True" } else { "False" }.into(),
        Dflt::Int(i) if matches!(a.ty, Ty::F32 | Ty::F64) => format!("{i}.0"),
        Dflt::Int(i) => i.to_string(),
        Dflt::Float(f) if f.fract() == 0.0 => format!("{f:.1}"),
        Dflt::Float(_) => a.default.text()?,
    })
}

/// `a`'s type in the `.pyi` stub.
fn pyi_type(a: &Arg) -> &'static str {
    match a.ty {
        Ty::Tensor => "ArrayLike",
        Ty::OptTensor => "Optional[ArrayLike]",
        Ty::F32 | Ty::F64 => "float",
        Ty::OptF32 => "Optional[float]",
        Ty::Size | Ty::Axis | Ty::Int => "int",
        Ty::Bool => "bool",
        Ty::Format => "str",
        Ty::Pair if matches!(a.default, Dflt::Same(_)) => "Optional[Pair]",
        Ty::Pair => "Pair",
        Ty::OptAxes => "AxisLike",
        Ty::Axes => "Sequence[int]",
        Ty::OptAxis => "Optional[int]",
        Ty::OptDType => "DTypeLike",
        _ => "object",
    }
}

/// The name of `o`'s generated Python function: the public one, or `_<name>` for a private one
/// (`OpInfo::py_private`).
pub(crate) fn py_fn(o: &OpInfo) -> String {
    if o.py_private {
        format!("_{}", o.name)
    } else {
        o.py().to_string()
    }
}

/// Whether every argument of `o` has a Python form ([`py_arg`]); kiln-gen refuses a row that
/// asks for a generated Python wrapper otherwise.
pub(crate) fn py_supported(o: &OpInfo) -> bool {
    o.is_plain()
        && o.args.iter().all(|a| py_arg(a).is_some() && (a.default == Dflt::Required || py_default(a).is_some()))
}

/// One `#[pyfunction]` per generated plain op: its docstring, PyO3 signature, the conversions
/// (in argument order, so the first bad argument is the one reported) and the kiln-core call.
fn plain_fns() -> String {
    let mut s = String::new();
    for o in py_plain() {
        s += "\n";
        s += &doc(o.py_doc);
        let sig: Vec<String> = o
            .args
            .iter()
            .map(|a| match py_default(a) {
                Some(d) => format!("{}={d}", py_name(a)),
                None => py_name(a).to_string(),
            })
            .collect();
        let _ = writeln!(s, "#[pyfunction]\n#[pyo3(signature = ({}))]", array_api_marks(&o, sig).join(", "));
        if o.args.len() + 1 > 7 {
            s += "#[allow(clippy::too_many_arguments)]\n";
        }
        let (mut params, mut convert, mut call) = (Vec::new(), String::new(), Vec::new());
        for a in o.args {
            let (ty, conv, pass) = py_arg(a).expect("checked by py_supported");
            params.push(format!("{}: {ty}", py_name(a)));
            if let Some(c) = conv {
                let _ = writeln!(convert, "    {c}");
            }
            call.push(pass);
        }
        let names = o.outputs();
        let ret = match names.len() {
            0 => "PyT".to_string(),
            n => format!("PyResult<({})>", vec!["PyTensor"; n].join(", ")),
        };
        let _ = writeln!(s, "pub fn {}(py: Python<'_>, {}) -> {ret} {{", py_fn(&o), params.join(", "));
        s += &convert;
        let call = format!("gpu(py, || ops::{}({}))", o.core, call.join(", "));
        if names.is_empty() {
            let _ = writeln!(s, "    {call}.map(PyTensor::new)\n}}");
        } else {
            // A named tuple: a Python tuple in the row's order.
            let wrapped: Vec<String> = names.iter().map(|n| format!("PyTensor::new({n})")).collect();
            let _ = writeln!(s, "    {call}.map(|{}| ({}))\n}}", o.out_pattern(), wrapped.join(", "));
        }
    }
    s
}

/// `params` (one per argument of `o`, in its order) with the Array API's marks where the row asks
/// for its form (`OpInfo::py_array_api`): `/` after the tensor inputs (positional-only), `*`
/// before the rest (keyword-only).
fn array_api_marks(o: &OpInfo, params: Vec<String>) -> Vec<String> {
    if !o.py_array_api {
        return params;
    }
    let inputs = o.args.iter().take_while(|a| a.ty == Ty::Tensor).count();
    let mut out: Vec<String> = params[..inputs].to_vec();
    out.push("/".into());
    if inputs < params.len() {
        out.push("*".into());
        out.extend_from_slice(&params[inputs..]);
    }
    out
}

/// The ops whose Python wrapper is generated (the table's name has no `~`).
pub(crate) fn py_generated() -> (Vec<UnaryOp>, Vec<BinaryOp>) {
    let u = UnaryOp::ALL.into_iter().filter(|o| !o.binding_names()[0].starts_with('~')).collect();
    let b = BinaryOp::ALL.into_iter().filter(|o| !o.binding_names()[0].starts_with('~')).collect();
    (u, b)
}

pub(crate) fn py_ops() -> String {
    let (us, bs) = py_generated();
    let mut s = header("//!");
    s += "//! The Python functions of kiln-core's unary and binary tables (numpy's names), of the plain\n";
    s += "//! ops of the op table whose row gives a Python docstring, and their registration; the\n";
    s += "//! wrappers with their own idiom (gelu's `approximate`, true division, …) are in ops.rs.\n\n";
    s += "use crate::convert::{\n    dtype_or, opt_tensor_arg, parse_axes, parse_dtype, parse_pair, parse_shape, tensor_arg, Float, Int,\n};\nuse crate::errors::gpu;\n";
    s += "use crate::ops::{axes_list, binary_fns, like_args, pair_or, place, quant_format, target_device, unary_fns, PyT};\nuse crate::tensor::PyTensor;\nuse kiln_core::{ops, DType};\n";
    s += "use pyo3::prelude::*;\n\n";
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
    s += "}\n";
    s += &plain_fns();
    for o in py_creation() {
        s += &creation_fns(&o);
    }
    s += "\n/// Adds every function above to the module.\npub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {\n";
    let plain = py_plain();
    for name in us
        .iter()
        .map(|o| o.binding_names()[0].to_string())
        .chain(bs.iter().map(|o| o.binding_names()[0].to_string()))
        .chain(plain.iter().map(py_fn))
        .chain(py_creation().iter().flat_map(|o| [o.name.to_string(), format!("{}_like", o.name)]))
    {
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
    s += "# the plain ops of kiln-core's op table with a generated wrapper\n";
    for o in py_plain().into_iter().filter(|o| !o.py_private) {
        let params: Vec<String> = o
            .args
            .iter()
            .map(|a| match pyi_default(a) {
                Some(d) => format!("{}: {} = {d}", py_name(a), pyi_type(a)),
                None => format!("{}: {}", py_name(a), pyi_type(a)),
            })
            .collect();
        let params = array_api_marks(&o, params);
        let ret = match o.outputs().len() {
            0 => "Tensor".to_string(),
            n => format!("tuple[{}]", vec!["Tensor"; n].join(", ")),
        };
        let _ = writeln!(s, "def {}({}) -> {ret}: ...", o.py(), params.join(", "));
    }
    s
}
