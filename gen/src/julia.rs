//! Julia: julia/src/ops_gen.jl (the elementwise ops as Julia broadcasts them),
//! julia/src/ccall_gen.jl (a `@ccall` wrapper per plain op of the table) and the conformance
//! runner's clauses for the ops whose Kiln.jl method takes the row's form.

use crate::text::*;
use kiln_core::ops::{op_table, Arg, BinaryOp, Dflt, OpInfo, Out, Ty, UnaryOp};
use kiln_core::DType;
use std::fmt::Write as _;

pub(crate) fn jl_symbol(name: &str) -> String {
    if name == "==" {
        ":(==)".into()
    } else {
        format!(":{name}")
    }
}

/// The Julia element type of a dtype (Base's type of the same bits).
fn jl_eltype(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float32",
        DType::F16 => "Float16",
        DType::I32 => "Int32",
        DType::U32 => "UInt32",
        DType::Bool => "Bool",
    }
}

/// The dtype table as Kiln.jl reads it: the element types, their C codes and back.
fn julia_dtypes() -> String {
    let names: Vec<&str> = DType::ALL.iter().map(|&d| jl_eltype(d)).collect();
    let mut s = String::from("# The element types of kiln-core's dtype table (core/src/dtype.rs) and their C codes.\n");
    let _ = writeln!(s, "const KilnEltype = Union{{{}}}\n", names.join(","));
    for d in DType::ALL {
        let _ = writeln!(s, "dtype_code(::Type{{{}}}) = 0x{:08x}", jl_eltype(d), d as u32);
    }
    s += "dtype_code(::Type{T}) where {T} =\n";
    let _ =
        writeln!(s, "    throw(ArgumentError(\"Kiln has no element type $T (supported: {})\"))\n", names.join(", "));
    s += "function eltype_of(code::UInt32)\n";
    for d in DType::ALL {
        let _ = writeln!(s, "    code == {} && return {}", d as u32, jl_eltype(d));
    }
    s += "    throw(KilnError(13, :INTERNAL, \"unknown dtype code $code\"))\nend\n\n";
    s
}

pub(crate) fn julia_ops() -> String {
    let mut s = header("#");
    s += &julia_dtypes();
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

/// One argument of a generated `_kiln_<op>`: the Julia parameter, the statements preparing its
/// C value, its `@ccall` arguments and the names `GC.@preserve` must keep alive.
struct JlArg {
    param: String,
    prep: Vec<String>,
    c: Vec<String>,
    keep: Vec<String>,
}

fn jl_arg(a: &Arg) -> JlArg {
    let n = a.name;
    let plain = |param: String, c: String| JlArg { param, prep: vec![], c: vec![c], keep: vec![] };
    match a.ty {
        Ty::Tensor => JlArg {
            param: format!("{n}::KilnArray"),
            prep: vec![],
            c: vec![format!("ptr({n})::Ptr{{KilnTensor}}")],
            keep: vec![n.into()],
        },
        Ty::OptTensor => JlArg {
            param: format!("{n}::Union{{Nothing,KilnArray}}"),
            prep: vec![],
            c: vec![format!("ptr({n})::Ptr{{KilnTensor}}")],
            keep: vec![n.into()],
        },
        Ty::Tensors => JlArg {
            param: format!("{n}::AbstractVector"),
            prep: vec![format!("{n}_p = Ptr{{KilnTensor}}[ptr(t) for t in {n}]")],
            c: vec![format!("{n}_p::Ptr{{Ptr{{KilnTensor}}}}"), format!("length({n}_p)::Csize_t")],
            keep: vec![n.into(), format!("{n}_p")],
        },
        Ty::DType => plain(format!("{n}::Type"), format!("dtype_code({n})::UInt32")),
        Ty::OptDType => JlArg {
            param: format!("{n}::Union{{Nothing,Type}}"),
            prep: vec![format!("{n}_r = {n} === nothing ? Ptr{{UInt32}}(C_NULL) : Ref{{UInt32}}(dtype_code({n}))")],
            c: vec![format!("{n}_r::Ptr{{UInt32}}")],
            keep: vec![],
        },
        Ty::Axis | Ty::Int => plain(format!("{n}::Integer"), format!("{n}::Cptrdiff_t")),
        Ty::OptAxis => JlArg {
            param: format!("{n}::Union{{Nothing,Integer}}"),
            prep: vec![format!("{n}_r = {n} === nothing ? Ptr{{Cptrdiff_t}}(C_NULL) : Ref{{Cptrdiff_t}}({n})")],
            c: vec![format!("{n}_r::Ptr{{Cptrdiff_t}}")],
            keep: vec![],
        },
        Ty::Axes | Ty::NewShape => JlArg {
            param: format!("{n}::AbstractVector{{<:Integer}}"),
            prep: vec![format!("{n}_v = Cptrdiff_t[i for i in {n}]")],
            c: vec![format!("{n}_v::Ptr{{Cptrdiff_t}}"), format!("length({n}_v)::Csize_t")],
            keep: vec![format!("{n}_v")],
        },
        // nothing: a null pointer and a length of 0 (every axis).
        Ty::OptAxes => JlArg {
            param: format!("{n}::Union{{Nothing,AbstractVector{{<:Integer}}}}"),
            prep: vec![
                format!("{n}_v = {n} === nothing ? Cptrdiff_t[] : Cptrdiff_t[i for i in {n}]"),
                format!("{n}_p = {n} === nothing ? Ptr{{Cptrdiff_t}}(C_NULL) : pointer({n}_v)"),
            ],
            c: vec![format!("{n}_p::Ptr{{Cptrdiff_t}}"), format!("length({n}_v)::Csize_t")],
            keep: vec![format!("{n}_v")],
        },
        Ty::Shape => JlArg {
            param: format!("{n}::AbstractVector{{<:Integer}}"),
            prep: vec![format!("{n}_v = Csize_t[i for i in {n}]")],
            c: vec![format!("{n}_v::Ptr{{Csize_t}}"), format!("length({n}_v)::Csize_t")],
            keep: vec![format!("{n}_v")],
        },
        // (height, width): kiln-core's order, as the C function takes them.
        Ty::Pair => JlArg {
            param: format!("{n}::Tuple{{Integer,Integer}}"),
            prep: vec![format!("{n}_h, {n}_w = {n}")],
            c: vec![format!("{n}_h::Csize_t"), format!("{n}_w::Csize_t")],
            keep: vec![],
        },
        Ty::Size => plain(format!("{n}::Integer"), format!("{n}::Csize_t")),
        Ty::U64 => plain(format!("{n}::Integer"), format!("{n}::UInt64")),
        Ty::F64 => plain(format!("{n}::Real"), format!("Float64({n})::Cdouble")),
        Ty::F32 => plain(format!("{n}::Real"), format!("Float32({n})::Cfloat")),
        Ty::OptF32 => JlArg {
            param: format!("{n}::Union{{Nothing,Real}}"),
            prep: vec![format!("{n}_r = {n} === nothing ? Ptr{{Cfloat}}(C_NULL) : Ref{{Cfloat}}({n})")],
            c: vec![format!("{n}_r::Ptr{{Cfloat}}")],
            keep: vec![],
        },
        Ty::Bool => plain(format!("{n}::Bool"), format!("{n}::Bool")),
        Ty::Format => plain(format!("{n}::AbstractString"), format!("{n}::Cstring")),
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

/// julia/src/ccall_gen.jl: `_kiln_<op>(…)` for every plain op of the table (elementwise aside),
/// its arguments in kiln-core's order and meaning (row-major: axes 0-based from the first
/// row-major dimension); Kiln.jl's Base methods translate Julia's column-major dims and call them.
pub(crate) fn julia_ccalls() -> String {
    let mut s = header("#");
    s += "# One wrapper per plain op of kiln-core's op table (core/src/ops/table.rs): `_kiln_<op>` calls the C\n";
    s += "# function `kiln_<op>` with the row's arguments in kiln-core's order and meaning (row-major axes,\n";
    s += "# 0-based; pairs as (height, width)) and wraps the result. Kiln.jl's Julia methods (Base names,\n";
    s += "# column-major `dims`, 1-based positions) translate their arguments and call these.\n";
    // nonzero's tensor per dimension: sorting.jl's own @ccall (Julia's dims reversed, 1-based).
    for o in op_table()
        .into_iter()
        .filter(|o| o.is_plain() && o.out != Out::PerDim && !crate::core_by_name::is_elementwise(o.name))
    {
        let args: Vec<JlArg> = o.args.iter().map(jl_arg).collect();
        let params: Vec<&str> = args.iter().map(|a| a.param.as_str()).collect();
        let mut cargs: Vec<String> = args.iter().flat_map(|a| a.c.clone()).collect();
        let names = o.outputs();
        // One tensor: `_new`; a named tuple: `_news` (a NamedTuple of its elements, in its order).
        let (new, outs) = if names.is_empty() {
            cargs.push("out::Ref{Ptr{KilnTensor}}".into());
            ("_new()".to_string(), "out")
        } else {
            cargs.extend((1..=names.len()).map(|i| format!("outs[{i}]::Ref{{Ptr{{KilnTensor}}}}")));
            let syms: Vec<String> = names.iter().map(|n| format!(":{n}")).collect();
            (format!("_news(({},))", syms.join(", ")), "outs")
        };
        let keep: Vec<String> = args.iter().flat_map(|a| a.keep.clone()).collect();
        let _ = write!(s, "\n\"`kiln_{}`: {}.\"\n", o.name, o.doc.replace('$', "\\$").replace('"', "\\\""));
        let _ = writeln!(s, "function _kiln_{}({})", o.name, params.join(", "));
        for a in &args {
            for p in &a.prep {
                let _ = writeln!(s, "    {p}");
            }
        }
        let call = format!("@ccall libkiln.kiln_{}({})::UInt32", o.name, cargs.join(", "));
        if keep.is_empty() {
            let _ = writeln!(s, "    return {new} do {outs}\n        {call}\n    end\nend");
        } else {
            let _ = writeln!(
                s,
                "    return GC.@preserve {} begin\n        {new} do {outs}\n            {call}\n        end\n    end\nend",
                keep.join(" ")
            );
        }
    }
    s
}

/// The ops whose Kiln.jl method (hand-written, Julia's names) takes the row's form read the
/// Julia way: the arguments without a default positional and the others keywords, named as the
/// row names them, but for Julia's own spellings, by type: an axis is `dims` (column-major), a
/// list of axes too (`:` for every axis; `keepdims` is dropped: Julia's reductions keep the
/// reduced dims), a (height, width) pair is given as (width, height) under its C stem (`pad`), a
/// creation op takes its element type first and its shape last, splatted and reversed
/// (`zeros(T, dims...)`), and a seed is a keyword. The conformance runner's calls of them are
/// generated ([`jl_runner`]); its others translate by hand (another name or meaning in Julia:
/// `mean` is Statistics', `var(x; corrected)`, `sort(x; rev)`, 1-based indices, GGUF's (k, n)
/// order, a cast before a scan).
const JL_ROW_FORM: &[&str] = &["sum", "max", "min", "diff"];

/// The ops the runner calls in the row's form: [`JL_ROW_FORM`]'s and those whose method is
/// generated ([`jl_plain`]) but for a named tuple (checked through `_kiln_<op>` below) and an op
/// taking positions (the runner's own 1-based translation of the case's indices).
fn jl_row_form(o: &OpInfo) -> bool {
    JL_ROW_FORM.contains(&o.name)
        || (!o.jl_doc.is_empty() && o.outputs().is_empty() && !o.args.iter().any(|a| a.positions))
}

/// [`JL_ROW_FORM`], for kiln-gen's check that it names plain ops of the table.
pub(crate) fn op_lists() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![("gen/src/julia.rs JL_ROW_FORM", JL_ROW_FORM.to_vec())]
}

/// The argument types [`jl_runner`] translates.
fn jl_row_form_ty(t: Ty) -> bool {
    matches!(
        t,
        Ty::Tensor
            | Ty::OptTensor
            | Ty::Axis
            | Ty::OptAxes
            | Ty::DType
            | Ty::Shape
            | Ty::U64
            | Ty::Pair
            | Ty::Size
            | Ty::Format
            | Ty::F32
            | Ty::F64
            | Ty::OptF32
            | Ty::Bool
    )
}

/// The first (op, type) of [`JL_ROW_FORM`] that the row form cannot translate, or of a plain
/// tuple op that the runner's core-form call cannot pass.
pub(crate) fn jl_row_form_unsupported() -> Option<(&'static str, Ty)> {
    let core_form = |t: Ty| jl_row_form_ty(t) && !matches!(t, Ty::OptAxes | Ty::Shape | Ty::Pair);
    op_table().into_iter().find_map(|o| {
        let ok: &dyn Fn(Ty) -> bool = if jl_row_form(&o) {
            &jl_row_form_ty
        } else if o.is_plain() && !o.outputs().is_empty() {
            &core_form
        } else {
            return None;
        };
        o.args.iter().find(|a| !ok(a.ty)).map(|a| (o.name, a.ty))
    })
}

/// The region of tests/conformance/jl_runner.jl: `run_table_op`, one line per op of
/// [`JL_ROW_FORM`] calling its Kiln.jl method with the case's inputs and parameters (by their
/// keys) translated by type (`nmax`: the largest rank among the inputs).
pub(crate) fn jl_runner() -> String {
    let mut s = String::from("function run_table_op(op, p, up, nmax)\n");
    for o in op_table().into_iter().filter(jl_row_form) {
        assert!(o.is_plain(), "{}: a row-form Julia call needs a plain row", o.name);
        let value = |a: &Arg| -> String {
            let k = a.key;
            match a.ty {
                Ty::Tensor | Ty::OptTensor => format!("up(\"{k}\")"),
                Ty::Axis => format!("jdim(Int(p[\"{k}\"]), nmax)"),
                Ty::OptAxes => format!("jaxes(p[\"{k}\"], nmax)"),
                Ty::DType => format!("TYPES[p[\"{k}\"]]"),
                Ty::Shape => format!("jshape(p[\"{k}\"])..."),
                Ty::U64 => format!("UInt64(p[\"{k}\"])"),
                Ty::Pair => format!("jpair(p[\"{k}\"])"),
                Ty::Size => format!("Int(p[\"{k}\"])"),
                Ty::Format => format!("Symbol(p[\"{k}\"])"),
                Ty::F32 | Ty::F64 | Ty::OptF32 | Ty::Bool => format!("p[\"{k}\"]"),
                t => unreachable!("{}: {t:?} is refused by kiln-gen's table check", o.name),
            }
        };
        let keyword = |a: &Arg| -> String {
            match a.ty {
                Ty::Axis | Ty::OptAxes => "dims".into(),
                Ty::Pair => a.c_stem.into(),
                _ => a.name.into(),
            }
        };
        let reduction = o.args.iter().any(|a| a.ty == Ty::OptAxes);
        // Julia's keywords: the arguments with a default, an axis and a seed; a reduction's keepdims is
        // Julia's own behaviour (the runner's check ignores the size-1 dims).
        let is_kw = |a: &&Arg| a.default != Dflt::Required || matches!(a.ty, Ty::U64 | Ty::Axis);
        let dropped = |a: &&Arg| reduction && a.name == "keepdims";
        // Positional: an element type first, a shape last (`zeros(T, dims...)`).
        let rank = |a: &&Arg| match a.ty {
            Ty::DType => 0,
            Ty::Shape => 2,
            _ => 1,
        };
        let mut pos: Vec<&Arg> = o.args.iter().filter(|a| !is_kw(a) && !dropped(a)).collect();
        pos.sort_by_key(rank);
        let pos: Vec<String> = pos.into_iter().map(value).collect();
        let kw: Vec<String> =
            o.args.iter().filter(|a| is_kw(a) && !dropped(a)).map(|a| format!("{}={}", keyword(a), value(a))).collect();
        let mut call = pos.join(", ");
        if !kw.is_empty() {
            call += "; ";
            call += &kw.join(", ");
        }
        let _ = writeln!(s, "    op == \"{}\" && return Kiln.{}({call})", o.name, o.jl());
    }
    // The plain ops giving a named tuple: their generated `_kiln_<op>` with kiln-core's own
    // arguments (row-major axes, 0-based indices), checked on the case's `output` element; their
    // Kiln.jl methods (Julia's dims and 1-based indices) are the binding's idiom, tested there.
    for o in op_table().into_iter().filter(|o| o.is_plain() && !o.outputs().is_empty()) {
        let value = |a: &Arg| -> String {
            let k = a.key;
            match a.ty {
                Ty::Tensor | Ty::OptTensor => format!("up(\"{k}\")"),
                Ty::Axis | Ty::Int | Ty::Size => format!("Int(p[\"{k}\"])"),
                Ty::DType => format!("TYPES[p[\"{k}\"]]"),
                Ty::U64 => format!("UInt64(p[\"{k}\"])"),
                Ty::Format => format!("String(p[\"{k}\"])"),
                Ty::F32 | Ty::F64 | Ty::OptF32 | Ty::Bool => format!("p[\"{k}\"]"),
                t => unreachable!("{}: {t:?} is refused by kiln-gen's table check", o.name),
            }
        };
        let args: Vec<String> = o.args.iter().map(value).collect();
        let _ = writeln!(
            s,
            "    op == \"{}\" && return Kiln._kiln_{}({})[Int(p[\"output\"])+1]",
            o.name,
            o.name,
            args.join(", ")
        );
    }
    s += "    return nothing\nend\n";
    s
}

/// An f64 default as a Julia literal of the argument's type (`1f-5`, `10000f0`, `0.5`).
fn jl_float(f: f64, f32: bool) -> String {
    let s = if f.fract() == 0.0 && f.abs() < 1e15 { format!("{}", f as i64) } else { format!("{f:e}") };
    match (f32, s.split_once('e')) {
        (true, Some((m, e))) => format!("{m}f{e}"),
        (true, None) => format!("{s}f0"),
        (false, Some(_)) => s,
        (false, None) => format!("{s}.0"),
    }
}

/// The Julia spelling of `a`'s default in a generated method (None: it has none), or an error
/// naming what the Julia form cannot express.
fn jl_default(a: &Arg) -> Result<Option<String>, String> {
    Ok(Some(match (a.default, a.ty) {
        (Dflt::Required, _) => return Ok(None),
        (Dflt::None, _) => "nothing".into(),
        (Dflt::Bool(b), _) => b.to_string(),
        // A core axis counted from the end is a Julia dim counted from the start.
        (Dflt::Int(i), Ty::Axis) if i < 0 => (-i).to_string(),
        (Dflt::Int(_), Ty::Axis) => return Err("an axis default counted from the start".into()),
        (Dflt::Int(i), Ty::F32) => jl_float(i as f64, true),
        (Dflt::Int(i), Ty::F64) => jl_float(i as f64, false),
        (Dflt::Int(i), _) => i.to_string(),
        (Dflt::Float(f), Ty::F32) => jl_float(f, true),
        (Dflt::Float(f), _) => jl_float(f, false),
        (Dflt::Same(s), _) => s.into(),
    }))
}

/// One argument of a generated Kiln.jl method: its Julia parameter (a positional one or a
/// keyword), and the value passed to `_kiln_<op>` (kiln-core's meaning).
struct JlMethodArg {
    param: String,
    keyword: bool,
    value: String,
}

/// `a` of `o` read the Julia way: an axis is the keyword `dims` (a Julia dim: 1-based, the first
/// the fastest, so core axis N - dims for inputs of up to N dims); a (height, width) pair is
/// given as (width, height), or one integer, under its C stem; a position tensor holds 1-based
/// positions (`_ids`: 0-based u32 for core, out-of-range ones past any axis); a GGUF format is a
/// symbol or a string. The arguments without a default are positional, the others keywords.
fn jl_method_arg(o: &OpInfo, a: &Arg) -> Result<JlMethodArg, String> {
    let n = a.name;
    let dflt = jl_default(a)?;
    let keyword = dflt.is_some() || a.ty == Ty::Axis;
    let with_default = |p: String| match &dflt {
        Some(d) => format!("{p}={d}"),
        None => p,
    };
    // The inputs whose dims an axis counts (positions aside: they may be host arrays).
    let dims_of: Vec<&str> = o.args.iter().filter(|b| b.ty == Ty::Tensor && !b.positions).map(|b| b.name).collect();
    Ok(match a.ty {
        Ty::Tensor if a.positions => JlMethodArg { param: n.into(), keyword, value: format!("_ids({n})") },
        Ty::Tensor => JlMethodArg { param: format!("{n}::KilnArray"), keyword, value: n.into() },
        Ty::OptTensor => {
            JlMethodArg { param: with_default(format!("{n}::Union{{Nothing,KilnArray}}")), keyword, value: n.into() }
        }
        Ty::Axis => JlMethodArg {
            param: with_default("dims::Integer".into()),
            keyword,
            value: format!("_dims_axis(dims, {})", dims_of.join(", ")),
        },
        Ty::Pair => {
            let p = if keyword { a.c_stem } else { n };
            JlMethodArg { param: with_default(p.into()), keyword, value: format!("reverse(_pair({p}))") }
        }
        Ty::Size => JlMethodArg { param: with_default(format!("{n}::Integer")), keyword, value: n.into() },
        Ty::F32 | Ty::F64 => JlMethodArg { param: with_default(format!("{n}::Real")), keyword, value: n.into() },
        Ty::OptF32 => {
            JlMethodArg { param: with_default(format!("{n}::Union{{Nothing,Real}}")), keyword, value: n.into() }
        }
        Ty::Bool => JlMethodArg { param: with_default(format!("{n}::Bool")), keyword, value: n.into() },
        Ty::Format => JlMethodArg { param: n.into(), keyword, value: format!("_quant_format({n})") },
        // Creation: the element type first and the Julia dims last, splatted (`zeros(T, dims...)`),
        // reversed into core's row-major shape; a seed is a keyword, a fresh one by default.
        Ty::DType => JlMethodArg { param: format!("{n}::Type"), keyword, value: n.into() },
        Ty::Shape => JlMethodArg { param: format!("{n}::Integer..."), keyword, value: format!("_cshape({n})") },
        Ty::U64 => JlMethodArg { param: format!("{n}::Integer=Base.rand(UInt64)"), keyword: true, value: n.into() },
        t => return Err(format!("{n} of type {t:?}")),
    })
}

/// The rows whose Kiln.jl method is generated (a Julia docstring in the row, `.julia(…)`).
pub(crate) fn jl_plain() -> Vec<OpInfo> {
    op_table().into_iter().filter(|o| !o.jl_doc.is_empty()).collect()
}

/// The first row asking for a generated Julia method that the Julia form cannot write, and why.
pub(crate) fn jl_method_unsupported() -> Option<(&'static str, String)> {
    jl_plain().into_iter().find_map(|o| {
        if !o.is_plain() {
            return Some((o.name, "not a plain row".into()));
        }
        if o.args.iter().filter(|a| a.ty == Ty::Axis).count() > 1 {
            return Some((o.name, "more than one axis (Julia's `dims` is one keyword)".into()));
        }
        o.args.iter().find_map(|a| jl_method_arg(&o, a).err()).map(|e| (o.name, e))
    })
}

/// julia/src/methods_gen.jl: the Kiln.jl method of every row with a Julia docstring, in Julia's
/// idiom read from the row ([`jl_method_arg`]); a named tuple comes back as a NamedTuple, its
/// position outputs (`OpInfo::positions`) 1-based.
pub(crate) fn julia_methods() -> String {
    let mut s = header("#");
    s += "# The Kiln.jl methods of the rows of kiln-core's op table that give a Julia docstring: each\n";
    s += "# reads its arguments the Julia way (`dims` for an axis, column-major; (width, height) pairs;\n";
    s += "# 1-based positions in and out) and calls the row's `_kiln_<op>` (ccall_gen.jl).\n";
    for o in jl_plain() {
        let args: Vec<JlMethodArg> =
            o.args.iter().map(|a| jl_method_arg(&o, a).expect("checked by jl_method_unsupported")).collect();
        // Positional: an element type first, the dims last (`zeros(T, dims...)`).
        let rank = |i: &usize| match o.args[*i].ty {
            Ty::DType => 0,
            Ty::Shape => 2,
            _ => 1,
        };
        let mut order: Vec<usize> = (0..args.len()).filter(|&i| !args[i].keyword).collect();
        order.sort_by_key(rank);
        order.extend((0..args.len()).filter(|&i| args[i].keyword));
        let args: Vec<&JlMethodArg> = order.iter().map(|&i| &args[i]).collect();
        let values: Vec<&str> = {
            let mut v: Vec<(usize, &str)> = order.iter().zip(&args).map(|(&i, a)| (i, a.value.as_str())).collect();
            v.sort_by_key(|(i, _)| *i);
            v.into_iter().map(|(_, x)| x).collect()
        };
        let pos: Vec<&str> = args.iter().filter(|a| !a.keyword).map(|a| a.param.as_str()).collect();
        let kw: Vec<&str> = args.iter().filter(|a| a.keyword).map(|a| a.param.as_str()).collect();
        let mut sig = pos.join(", ");
        if !kw.is_empty() {
            sig += "; ";
            sig += &kw.join(", ");
        }
        // The docstring's call line: the parameters without their types.
        let bare = |a: &&JlMethodArg| -> String {
            let p = a.param.as_str();
            match (p.split_once("::"), p.split_once('=')) {
                (Some((name, _)), Some((_, d))) => format!("{name}={d}"),
                (Some((name, _)), None) if p.ends_with("...") => format!("{name}..."),
                (Some((name, _)), None) => name.to_string(),
                (None, _) => p.to_string(),
            }
        };
        let bk: Vec<String> = args.iter().filter(|a| a.keyword).map(bare).collect();
        let mut call_line = args.iter().filter(|a| !a.keyword).map(bare).collect::<Vec<_>>().join(", ");
        if !bk.is_empty() {
            call_line += "; ";
            call_line += &bk.join(", ");
        }
        let _ = write!(
            s,
            "\n\"\"\"\n    Kiln.{}({call_line})\n\n{}\"\"\"\n",
            o.jl(),
            wrap(&o.jl_doc.replace('$', "\\$"), 100)
        );
        let call = format!("_kiln_{}({})", o.name, values.join(", "));
        let outs = o.outputs();
        if outs.is_empty() {
            let _ = writeln!(s, "{}({sig}) = {call}", o.jl());
            // Only an element type and dims: Float32 when the type is left out (as Base's zeros).
            if pos.len() == 2 && o.args.iter().any(|a| a.ty == Ty::DType) && o.args.iter().any(|a| a.ty == Ty::Shape) {
                let shape = o.args.iter().find(|a| a.ty == Ty::Shape).map_or("dims", |a| a.name);
                let kw = if kw.is_empty() { "" } else { "; kw..." };
                let _ = writeln!(s, "{}({shape}::Integer...{kw}) = {}(Float32, {shape}...{kw})", o.jl(), o.jl());
            }
        } else {
            let fields: Vec<String> = outs
                .iter()
                .map(|n| {
                    if o.position_outputs.contains(n) {
                        format!("{n}=_binary_scalar(\"add\", r.{n}, 1, false)")
                    } else {
                        format!("{n}=r.{n}")
                    }
                })
                .collect();
            let _ = writeln!(s, "function {}({sig})\n    r = {call}\n    return ({})\nend", o.jl(), fields.join(", "));
        }
    }
    s
}

/// `text` in lines of at most `width` columns (a word longer than that on a line of its own).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out += &line;
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    out + &line + "\n"
}

/// The region of tests/conformance/jl_runner.jl before `exposed`: for every op of the table but the
/// elementwise ones (which the runner checks as Kiln.jl broadcasts them), the checks that show
/// Kiln.jl exposes it: the row's own (`OpInfo::jl_owns`), else its Julia name owning a method on
/// one Float32 matrix; a generated Kiln.jl method adds its function (`:name`).
pub(crate) fn jl_exposed() -> String {
    let mut s = String::from("const EXPOSED = Dict{String,Vector{Any}}(\n");
    let ops: Vec<OpInfo> = op_table()
        .into_iter()
        .filter(|o| !crate::core_by_name::is_elementwise(o.name) && !matches!(o.name, "where" | "clip"))
        .collect();
    for o in &ops {
        let mut checks: Vec<String> = if o.jl_owns.is_empty() && o.jl_doc.is_empty() {
            vec![format!("(Kiln.{}, Tuple{{KA}})", o.jl())]
        } else {
            o.jl_owns
                .split("; ")
                .filter(|c| !c.is_empty())
                .map(|c| match c.split_once('(') {
                    _ if c.starts_with(':') => c.to_string(),
                    Some((f, types)) => format!("({f}, Tuple{{{}}})", types.trim_end_matches(')').replace(", ", ",")),
                    None => panic!("{}: jl_owns check {c:?} is neither `f(T, ...)` nor `:name`", o.name),
                })
                .collect()
        };
        if !o.jl_doc.is_empty() {
            checks.push(format!(":{}", o.jl()));
        }
        let _ = writeln!(s, "    \"{}\" => [{}],", o.name, checks.join(", "));
    }
    s + ")\n"
}
