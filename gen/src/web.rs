//! JavaScript (web/): the wasm exports of the plain ops (web/src/ops_gen.rs), their JavaScript
//! wrappers with the elementwise ops and the op and error tables (web/js/ops_gen.js), the ops'
//! part of web/js/kiln.d.ts, and the browser conformance runner's dispatch (web/test/conformance.js).
//!
//! The JavaScript form of an op: the arguments in the row's order under their camelCase names,
//! optional where the row gives a default (the default itself is applied once, in the wasm
//! export); the ops of [`OPTIONS`] take their optional arguments (optional tensors aside) in a
//! trailing options object instead. Two JavaScript conventions on top of the row: a creation
//! op's `dtype` comes last and defaults to "f32" (numpy's default float), and [`JS_DEFAULTS`]
//! gives the defaults numpy has where the core row requires a value.

use crate::text::*;
use kiln_core::ops::{op_table, Arg, BinaryOp, Dflt, OpInfo, Ty, UnaryOp};
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

/// Names that JavaScript reserves (an export or a parameter of that name is spelt otherwise).
fn reserved(name: &str) -> bool {
    matches!(name, "var" | "delete" | "in" | "new" | "function" | "default" | "class" | "const" | "let")
}

/// The ops whose optional arguments (optional tensors aside) JavaScript takes in a trailing
/// options object, `sort(x, { axis, descending })`: the published form of these functions.
const OPTIONS: &[&str] = &[
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    "attention",
    "cumulative_sum",
    "cumulative_prod",
    "sort",
    "argsort",
    "isin",
];

/// Defaults JavaScript gives (numpy's) where the core row requires the argument: (op, argument, value).
const JS_DEFAULTS: &[(&str, &str, &str)] = &[("arange", "step", "1"), ("concat", "axis", "0")];

/// The plain ops whose core form waits for a readback, which the page's one thread must not do:
/// their export is a promise, from the core's `<op>_async` form. kiln-core has none for
/// `unique_values`, `unique_counts` and `unique_inverse`: kiln.js gives them from `uniqueAll`'s
/// promise (no export of their own); `unique_all`'s and `nonzero`'s promises of several tensors
/// are written by hand (web/src/ops.rs, kiln.js).
const BROWSER_ASYNC: &[&str] =
    &["quantize", "nonzero", "unique_all", "unique_values", "unique_counts", "unique_inverse"];

/// The ops of [`BROWSER_ASYNC`] whose core has the `<op>_async` form the export awaits.
const CORE_ASYNC: &[&str] = &["quantize"];

/// The ops whose JavaScript wrapper kiln.js writes by hand although their wasm export is
/// generated, and why (JavaScript's own idiom).
const JS_HAND: &[(&str, &str)] = &[
    ("diff", "a number for prepend / append is one element along the axis"),
    ("searchsorted", "side: \"left\" | \"right\" as numpy spells it, not the core's `right` flag"),
];

/// The lists of op names above, for kiln-gen's check that each names a plain op of the table.
pub(crate) fn op_lists() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("gen/src/web.rs OPTIONS", OPTIONS.to_vec()),
        ("gen/src/web.rs JS_DEFAULTS", JS_DEFAULTS.iter().map(|(op, _, _)| *op).collect()),
        ("gen/src/web.rs BROWSER_ASYNC", BROWSER_ASYNC.to_vec()),
        ("gen/src/web.rs CORE_ASYNC", CORE_ASYNC.to_vec()),
        ("gen/src/web.rs JS_HAND", JS_HAND.iter().map(|(op, _)| *op).collect()),
    ]
}

/// The ops with a generated wasm export: every plain op of the table but the elementwise ones
/// (the `unary` / `binary` exports by name) and those of [`BROWSER_ASYNC`] without a core async form.
pub(crate) fn wasm_plain() -> Vec<OpInfo> {
    op_table()
        .into_iter()
        .filter(|o| o.is_plain() && !crate::core_by_name::is_elementwise(o.name))
        .filter(|o| !BROWSER_ASYNC.contains(&o.name) || CORE_ASYNC.contains(&o.name))
        .collect()
}

/// Whether the op's export is a promise ([`BROWSER_ASYNC`]).
fn is_async(o: &OpInfo) -> bool {
    BROWSER_ASYNC.contains(&o.name)
}

/// The ops with a generated JavaScript wrapper ([`wasm_plain`] less [`JS_HAND`]).
fn js_plain() -> Vec<OpInfo> {
    wasm_plain().into_iter().filter(|o| !JS_HAND.iter().any(|(n, _)| *n == o.name)).collect()
}

/// The wasm export's name: the core name in camelCase (kiln.js's wrappers call it).
fn wasm_name(o: &OpInfo) -> String {
    let n = camel(o.name);
    if reserved(&n) {
        n + "_"
    } else {
        n
    }
}

/// `d` as a Rust literal of the argument's type.
fn rust_default(a: &Arg, d: Dflt) -> String {
    match (d, a.ty) {
        (Dflt::Bool(b), _) => b.to_string(),
        (Dflt::Int(i), Ty::F32 | Ty::F64) => format!("{i}.0"),
        (Dflt::Int(i), Ty::Pair) => format!("[{i}, {i}]"),
        (Dflt::Int(i), _) => i.to_string(),
        (Dflt::Float(f), _) => format!("{f:?}"),
        (Dflt::Same(other), _) => other.to_string(),
        (Dflt::Required | Dflt::None, _) => unreachable!("no default value"),
    }
}

/// The wasm export's parameter type for `a`, and the statement (if any) binding kiln-core's value
/// under `a.name` (in argument order: a `Same` default reads the earlier argument's value).
/// Arguments with a default are `Option`s here: JavaScript's `undefined` and `null` both give it.
fn wasm_arg(a: &Arg) -> (&'static str, Option<String>) {
    let n = a.name;
    let has = !matches!(a.default, Dflt::Required | Dflt::None);
    let d = || rust_default(a, a.default);
    let let_ = |e: String| Some(format!("let {n} = {e};"));
    match a.ty {
        Ty::Tensor => ("&Tensor", let_(format!("&{n}.inner"))),
        // By value (wasm-bindgen's only optional class): kiln.js hands over a clone.
        Ty::OptTensor => ("Option<Tensor>", let_(format!("{n}.as_ref().map(|t| &t.inner)"))),
        Ty::Tensors => ("&TensorList", let_(format!("&{n}.items.iter().collect::<Vec<_>>()"))),
        Ty::DType => ("&str", let_(format!("tensor::dtype({n})?"))),
        Ty::OptDType => ("Option<String>", let_(format!("h::opt_dtype({n})?"))),
        Ty::Axis | Ty::Int if has => ("Option<i32>", let_(format!("{n}.map_or({}, |v| v as isize)", d()))),
        Ty::Axis | Ty::Int => ("i32", let_(format!("{n} as isize"))),
        Ty::OptAxis => ("Option<i32>", let_(format!("{n}.map(|v| v as isize)"))),
        Ty::Axes | Ty::NewShape => ("Vec<i32>", let_(format!("&h::isizes(&{n})"))),
        Ty::OptAxes => ("Option<Vec<i32>>", let_(format!("{n}.map(|v| h::isizes(&v))"))),
        Ty::Shape => ("Vec<u32>", let_(format!("&tensor::usizes(&{n})"))),
        Ty::Pair if has => ("Option<Vec<u32>>", let_(format!("h::pair({n}, {}, \"{n}\")?", d()))),
        Ty::Pair => ("Vec<u32>", let_(format!("h::pair(Some({n}), [0, 0], \"{n}\")?"))),
        Ty::Size if has => ("Option<u32>", let_(format!("{n}.map_or({}, |v| v as usize)", d()))),
        Ty::Size => ("u32", let_(format!("{n} as usize"))),
        Ty::U64 => ("f64", let_(format!("h::whole({n}, \"{n}\")?"))),
        Ty::F64 if has => ("Option<f64>", let_(format!("{n}.unwrap_or({})", d()))),
        Ty::F64 => ("f64", None),
        Ty::F32 if has => ("Option<f32>", let_(format!("{n}.unwrap_or({})", d()))),
        Ty::F32 => ("f32", None),
        Ty::OptF32 => ("Option<f32>", None),
        Ty::Bool if has => ("Option<bool>", let_(format!("{n}.unwrap_or({})", d()))),
        Ty::Bool => ("bool", None),
        Ty::Format => ("&str", let_(format!("h::quant_format({n})?"))),
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

/// The call's form of a bound argument (an optional list of axes is borrowed).
fn wasm_pass(a: &Arg) -> String {
    match a.ty {
        Ty::OptAxes => format!("{}.as_deref()", a.name),
        _ => a.name.to_string(),
    }
}

/// web/src/ops_gen.rs: one `#[wasm_bindgen]` export per op of [`wasm_plain`].
pub(crate) fn wasm_ops() -> String {
    let mut s = header("//!");
    s += "//! One wasm export per plain op of kiln-core's op table (the elementwise ones aside: `unary` /\n";
    s += "//! `binary` by name in ops.rs), named after the core op in camelCase, its arguments in the core\n";
    s += "//! call's order. An argument with a default is optional (`undefined` or `null`) and takes the\n";
    s += "//! row's default here, once; js/ops_gen.js's wrappers give each op its JavaScript name and form.\n\n";
    s += "// conv2d takes seven arguments, as its row does.\n";
    s += "#![allow(clippy::too_many_arguments)]\n\n";
    s += "use crate::error::JsResult;\nuse crate::ops as h;\nuse crate::tensor::{self, Tensor, TensorList};\n";
    s += "use kiln_core::ops;\nuse wasm_bindgen::prelude::*;\n";
    for o in wasm_plain() {
        let mut params = Vec::new();
        let mut pre = Vec::new();
        for a in o.args {
            let (ty, bind) = wasm_arg(a);
            params.push(format!("{}: {ty}", a.name));
            pre.extend(bind);
        }
        let _ = write!(s, "\n/// {}\n", o.doc);
        let _ = writeln!(s, "#[wasm_bindgen(js_name = \"{}\")]", wasm_name(&o));
        let kw = if is_async(&o) { "async fn" } else { "fn" };
        let names = o.outputs();
        let ret = if names.is_empty() { "Tensor" } else { "Vec<Tensor>" };
        let _ = writeln!(s, "pub {kw} {}({}) -> JsResult<{ret}> {{", o.core, params.join(", "));
        for p in pre {
            let _ = writeln!(s, "    {p}");
        }
        let call: Vec<String> = o.args.iter().map(wasm_pass).collect();
        if !names.is_empty() {
            // A named tuple: an array in its order (kiln.js's wrapper names the elements).
            assert!(!is_async(&o), "{}: a promise of a tuple is not generated", o.name);
            let wrapped: Vec<String> = names.iter().map(|n| format!("Tensor::from({n})")).collect();
            let _ = writeln!(
                s,
                "    ops::{}({}).map(|{}| vec![{}]).map_err(crate::error::js_err)\n}}",
                o.core,
                call.join(", "),
                o.out_pattern(),
                wrapped.join(", ")
            );
        } else if is_async(&o) {
            let _ = writeln!(s, "    h::out(ops::{}_async({}).await)\n}}", o.core, call.join(", "));
        } else {
            let _ = writeln!(s, "    h::out(ops::{}({}))\n}}", o.core, call.join(", "));
        }
    }
    s
}

/// One parameter of an op's JavaScript form.
struct JsParam {
    arg: &'static Arg,
    /// The JavaScript name (camelCase; a reserved word spelt otherwise: batch_norm's `variance`).
    name: String,
    /// A JavaScript default written in the wrapper (the row's own defaults are the wasm export's).
    js_default: Option<String>,
    optional: bool,
    /// In the trailing options object.
    in_options: bool,
}

/// `o`'s JavaScript parameters, in the JavaScript order.
fn js_params(o: &OpInfo) -> Vec<JsParam> {
    let options = OPTIONS.contains(&o.name);
    let creation = matches!(o.family, "creation" | "random");
    let mut ps: Vec<JsParam> = o
        .args
        .iter()
        .map(|a| {
            let mut name = camel(a.name);
            if reserved(&name) {
                name = match name.as_str() {
                    "var" => "variance".into(),
                    _ => name + "_",
                };
            }
            let mut js_default =
                JS_DEFAULTS.iter().find(|(op, arg, _)| *op == o.name && *arg == a.name).map(|(_, _, v)| v.to_string());
            if creation && a.ty == Ty::DType {
                js_default = Some("\"f32\"".into());
            }
            let optional = a.default != Dflt::Required || js_default.is_some();
            let in_options = options && optional && a.ty != Ty::OptTensor;
            JsParam { arg: a, name, js_default, optional, in_options }
        })
        .collect();
    if creation {
        // A creation op's dtype last: `zeros([2, 3])`, `full([2], 7)`, `randomUniform([4], seed)`.
        if let Some(i) = ps.iter().position(|p| p.arg.ty == Ty::DType) {
            let p = ps.remove(i);
            ps.push(p);
        }
    }
    ps
}

/// The value kiln.js hands the wasm export for parameter `p`.
fn js_pass(p: &JsParam) -> String {
    let n = &p.name;
    match p.arg.ty {
        // The export consumes an optional tensor's handle: it gets a clone.
        Ty::OptTensor => format!("opt({n})"),
        Ty::OptAxes => format!("axesOf({n})"),
        Ty::Pair => format!("pairOf({n})"),
        Ty::Tensors => "list".into(),
        _ => n.clone(),
    }
}

/// The TypeScript type of `p`.
fn ts_type(p: &JsParam) -> &'static str {
    match p.arg.ty {
        Ty::Tensor => "Tensor",
        Ty::OptTensor => "Tensor | null",
        Ty::Tensors => "Tensor[]",
        Ty::DType => "DType",
        Ty::OptDType => "DType | null",
        Ty::Axis | Ty::Int | Ty::Size | Ty::U64 | Ty::F64 | Ty::F32 => "number",
        Ty::OptAxis | Ty::OptF32 => "number | null",
        Ty::Axes | Ty::NewShape | Ty::Shape => "number[]",
        Ty::OptAxes => "Axes",
        Ty::Pair => "Pair",
        Ty::Bool => "boolean",
        Ty::Format => "string",
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

/// The default of `p` as a doc line says it.
fn default_text(p: &JsParam) -> Option<String> {
    if let Some(d) = &p.js_default {
        return Some(d.clone());
    }
    Some(match p.arg.default {
        Dflt::Required => return None,
        Dflt::None => "null".into(),
        Dflt::Same(other) => camel(other),
        d => d.text()?,
    })
}

/// The JavaScript form of an op: `(x, axes, keepdims)` or `(x, { axis, descending } = {})`.
fn js_signature(ps: &[JsParam]) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in ps.iter().filter(|p| !p.in_options) {
        out.push(match &p.js_default {
            Some(d) => format!("{} = {d}", p.name),
            None => p.name.clone(),
        });
    }
    let opts: Vec<&str> = ps.iter().filter(|p| p.in_options).map(|p| p.name.as_str()).collect();
    if !opts.is_empty() {
        out.push(format!("{{ {} }} = {{}}", opts.join(", ")));
    }
    out.join(", ")
}

/// One JSDoc line: the op's kiln-core name, doc line and dtypes (and why a promise).
fn js_doc(o: &OpInfo) -> String {
    let wait = if is_async(o) { " Resolves: it waits for a readback." } else { "" };
    format!("kiln-core's `{}`: {} (dtypes: {}).{wait}", o.name, o.doc, o.dtypes).replace("*/", "* /")
}

pub(crate) fn web_ops() -> String {
    let mut s = header("//");
    s += "// The op table as the JavaScript package names it (the Python binding's names in camelCase),\n";
    s += "// the error table, one function per elementwise op and one per plain op of the table (its\n";
    s += "// arguments in the row's order, gen/src/web.rs says the form); kiln.js writes the others.\n\n";
    s += "import { axesOf, binaryOp, opt, pairOf, unaryOp, wasm, withList } from \"./core.js\";\n\n";
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
    for o in js_plain() {
        let ps = js_params(&o);
        // The wasm export takes the row's order.
        let pass: Vec<String> = o
            .args
            .iter()
            .map(|a| js_pass(ps.iter().find(|p| std::ptr::eq(p.arg, a)).expect("every argument has a parameter")))
            .collect();
        let mut call = format!("wasm.{}({})", wasm_name(&o), pass.join(", "));
        if let Some(p) = ps.iter().find(|p| p.arg.ty == Ty::Tensors) {
            call = format!("withList({}, (list) => {call})", p.name);
        }
        if !o.outputs().is_empty() {
            // A named tuple: an object with its elements' names (as uniqueAll's).
            let t = o.outputs().join(", ");
            call = format!("{{\n  const [{t}] = {call};\n  return {{ {t} }};\n}}");
        }
        let name = js_name(&o);
        let _ = write!(s, "\n/** {} */\n", js_doc(&o));
        if reserved(&name) {
            let _ = writeln!(s, "const {name}_ = ({}) => {call};\nexport {{ {name}_ as {name} }};", js_signature(&ps));
        } else {
            let _ = writeln!(s, "export const {name} = ({}) => {call};", js_signature(&ps));
        }
    }
    s
}

/// The region of web/js/kiln.d.ts: the elementwise ops and the ops of [`js_plain`], with the
/// rows' doc lines.
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
    s += "\n// the plain ops of kiln-core's op table (optional: a default, or null for none)\n";
    for o in js_plain() {
        let ps = js_params(&o);
        let mut doc = vec![js_doc(&o)];
        for p in &ps {
            let dflt = default_text(p).map(|d| format!(" (default {d})")).unwrap_or_default();
            let at = if p.in_options { format!("options.{}", p.name) } else { p.name.clone() };
            // The rows say None (Python's spelling) where JavaScript passes null.
            doc.push(format!("@param {at} {}{dflt}", p.arg.doc.replace("None", "null").replace("*/", "* /")));
        }
        s += "/**\n";
        for line in doc {
            let _ = writeln!(s, " * {line}");
        }
        s += " */\n";
        let mut params: Vec<String> = ps
            .iter()
            .filter(|p| !p.in_options)
            .map(|p| format!("{}{}: {}", p.name, if p.optional { "?" } else { "" }, ts_type(p)))
            .collect();
        let opts: Vec<String> =
            ps.iter().filter(|p| p.in_options).map(|p| format!("{}?: {}", p.name, ts_type(p))).collect();
        if !opts.is_empty() {
            params.push(format!("options?: {{ {} }}", opts.join("; ")));
        }
        let name = js_name(&o);
        let one = match o.outputs() {
            [] => "Tensor".to_string(),
            names => format!("{{ {} }}", names.iter().map(|n| format!("{n}: Tensor")).collect::<Vec<_>>().join("; ")),
        };
        let ret = if is_async(&o) { format!("Promise<{one}>") } else { one };
        if reserved(&name) {
            let _ =
                writeln!(s, "declare function {name}_({}): {ret};\nexport {{ {name}_ as {name} }};", params.join(", "));
        } else {
            let _ = writeln!(s, "export function {name}({}): {ret};", params.join(", "));
        }
    }
    s
}

/// The region of web/test/conformance.js: one `case` per op of [`js_plain`], calling its
/// kiln.js function with the manifest's inputs and parameters (by their keys) in its JavaScript form.
pub(crate) fn web_runner() -> String {
    let mut s = String::new();
    for o in js_plain() {
        let ps = js_params(&o);
        let value = |p: &JsParam| -> String {
            let k = p.arg.key;
            match p.arg.ty {
                Ty::Tensor | Ty::OptTensor => format!("get(\"{k}\")"),
                Ty::Tensors => "ins.map(([, t]) => t)".into(),
                _ => format!("p.{k}"),
            }
        };
        let mut args: Vec<String> = ps.iter().filter(|p| !p.in_options).map(value).collect();
        let opts: Vec<String> =
            ps.iter().filter(|p| p.in_options).map(|p| format!("{}: {}", p.name, value(p))).collect();
        if !opts.is_empty() {
            args.push(format!("{{ {} }}", opts.join(", ")));
        }
        if o.outputs().is_empty() {
            let _ = writeln!(s, "    case \"{}\":\n      return f({});", o.name, args.join(", "));
        } else {
            // A named tuple: the case's `output` element (the others freed).
            let els: Vec<String> = o.outputs().iter().map(|n| format!("r.{n}")).collect();
            let _ = writeln!(
                s,
                "    case \"{}\": {{\n      const r = f({});\n      return pick([{}], p.output);\n    }}",
                o.name,
                args.join(", "),
                els.join(", ")
            );
        }
    }
    s
}
