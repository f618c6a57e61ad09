//! Elixir: the NIFs of the plain ops (nif-elixir/native/src/ops_gen.rs) and their list in
//! lib/kiln/native.ex, the op lists of nif-elixir/lib/kiln.ex and the codes of lib/kiln/error.ex.

use crate::text::header;
use kiln_core::ops::{op_table, Arg, BinaryOp, Dflt, OpInfo, Out, Ty, UnaryOp};
use kiln_core::session::LimitTy;
use kiln_core::{DType, ErrorCode, SessionLimits};
use std::fmt::Write as _;

/// Kernel functions that an op of the tables may be named after (Kiln defines its own, so the
/// module leaves Kernel's out: the elementwise ops' and the generated functions' that clash).
pub(crate) const ELIXIR_KERNEL: &[(&str, usize)] = &[
    ("abs", 1),
    ("ceil", 1),
    ("div", 2),
    ("floor", 1),
    ("max", 2),
    ("min", 2),
    ("rem", 2),
    ("round", 1),
    ("trunc", 1),
];

pub(crate) fn elixir_ops() -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    for op in UnaryOp::ALL {
        names.push((op.binding_names()[1].strip_prefix('~').unwrap_or(op.binding_names()[1]), 1));
        names.push((op.name(), 1));
    }
    for op in BinaryOp::ALL {
        names.push((op.binding_names()[1].strip_prefix('~').unwrap_or(op.binding_names()[1]), 2));
        names.push((op.name(), 2));
    }
    // A generated function with options has two arities (`sum/1`, `sum/2`).
    for o in ex_plain() {
        let required = o.args.iter().filter(|a| ex_required(a)).count();
        names.push((o.ex(), required));
        if required < o.args.len() {
            names.push((o.ex(), required + 1));
        }
    }
    let mut except: Vec<(&str, usize)> = ELIXIR_KERNEL.iter().copied().filter(|k| names.contains(k)).collect();
    except.sort();
    let list = except.iter().map(|(n, a)| format!("{n}: {a}")).collect::<Vec<_>>().join(", ");
    let mut s = format!("  import Kernel, except: [{list}]\n\n");
    s += "  # {Elixir name (Nx's where Nx has the op), kiln-core name, dtypes: :float, :numeric,\n  # :bits (integers and {:u, 8}, the type kept) or :any (bool included, gives {:u, 8})}\n  @unary_ops [\n";
    let n = UnaryOp::ALL.len();
    for (i, op) in UnaryOp::ALL.into_iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let rule = if op.gives_bool() {
            "any"
        } else if op.is_bitwise() {
            "bits"
        } else if op.allows_int() {
            "numeric"
        } else {
            "float"
        };
        let _ = writeln!(s, "    {{:{}, \"{}\", :{rule}}}{sep}", op.binding_names()[1], op.name());
    }
    s +=
        "  ]\n\n  # {Elixir name (Nx's where Nx has the op), kiln-core name, gives {:u, 8} (bool)?}\n  @binary_ops [\n";
    let n = BinaryOp::ALL.len();
    for (i, op) in BinaryOp::ALL.into_iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let _ = writeln!(s, "    {{:{}, \"{}\", {}}}{sep}", op.binding_names()[1], op.name(), op.gives_bool());
    }
    // The blank line before the END marker is mix format's.
    s += "  ]\n\n";
    s
}

/// A dtype as Nx names it: `{:f, 32}` (the type tuple) and `f32` (its short name).
fn nx_type(d: DType) -> (String, String) {
    let kind = match d {
        DType::F32 | DType::F16 => "f",
        DType::I32 => "s",
        DType::U32 | DType::Bool => "u",
    };
    let bits = d.size() * 8;
    (format!("{{:{kind}, {bits}}}"), format!("{kind}{bits}"))
}

/// `@name %{pairs}` as `mix format` writes it (one line when it fits lib/kiln.ex's 110 columns).
fn ex_map(name: &str, pairs: &[String]) -> String {
    let one = format!("  @{name} %{{{}}}\n", pairs.join(", "));
    if one.len() <= EX_LINE + 1 {
        return one;
    }
    format!("  @{name} %{{\n    {}\n  }}\n", pairs.join(",\n    "))
}

/// The region of lib/kiln.ex with kiln-core's dtype table in Nx's terms: the type tuple of each
/// dtype and its core name (what the NIF takes), the atoms `normalize_type/1` accepts (Nx's short
/// names and the core's), `normalize_type/1` and `type_name/1`.
pub(crate) fn elixir_dtypes() -> String {
    let (mut native_of, mut type_of, mut aliases, mut names) = (vec![], vec![], vec![], String::new());
    let (mut tuples, mut atoms) = (vec![], vec![]);
    for d in DType::ALL {
        let (t, short) = nx_type(d);
        native_of.push(format!("{t} => :{}", d.name()));
        type_of.push(format!("{}: {t}", d.name()));
        aliases.push(format!("{short}: {t}"));
        tuples.push(t.clone());
        if short != d.name() {
            aliases.push(format!("{}: {t}", d.name()));
            atoms.push(format!("`:{short}` (`:{}`)", d.name()));
        } else {
            atoms.push(format!("`:{short}`"));
        }
        let _ = writeln!(names, "  def type_name({t}), do: \"{short}\"");
    }
    let mut s = ex_map("native_of", &native_of) + &ex_map("type_of", &type_of) + &ex_map("aliases", &aliases);
    let doc = format!(
        "Normalizes a type: {} or the atoms {}. Anything else raises `Kiln.Error` with code `:invalid_argument`.",
        tuples.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", "),
        atoms.join(", ")
    );
    let _ = write!(
        s,
        "\n  @doc \"\"\"\n{}\n      iex> Kiln.normalize_type(:f16)\n      {{:f, 16}}\n  \"\"\"\n",
        indent_wrap(&doc)
    );
    s += "  def normalize_type(type) when is_map_key(@native_of, type), do: type\n";
    s += "  def normalize_type(type) when is_map_key(@aliases, type), do: Map.fetch!(@aliases, type)\n\n";
    s += "  def normalize_type(type),\n    do:\n      raise(\n        Error.new(\n          :invalid_argument,\n";
    let _ = writeln!(s, "          \"unknown type #{{inspect(type)}} (supported: {})\"", tuples.join(", "));
    s += "        )\n      )\n";
    s += "\n  @doc false\n";
    s + &names + "\n"
}

/// `text` as a @doc's lines: two spaces in, at most 100 columns.
fn indent_wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(" ");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 100 {
            out += &line;
            out.push('\n');
            line = String::from(" ");
        }
        line.push(' ');
        line += word;
    }
    out + &line + "\n"
}

pub(crate) fn elixir_errors() -> String {
    let mut s = String::from("  @codes %{\n");
    let n = ErrorCode::ALL.len();
    for (i, c) in ErrorCode::ALL.iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let _ = writeln!(s, "    {}: {}{sep}", c.name().to_ascii_lowercase(), *c as u32);
    }
    s += "  }\n\n";
    s
}

/// The ops whose NIF is generated: every plain op of the table but the elementwise ones (which
/// share the `unary` / `binary` NIFs by name).
pub(crate) fn nif_plain() -> Vec<OpInfo> {
    op_table().into_iter().filter(|o| o.is_plain() && !crate::core_by_name::is_elementwise(o.name)).collect()
}

/// The NIF's decoder type for `a` (lib.rs's types: their errors name the bad term), and the
/// expression giving kiln-core its value inside the call (after [`nif_prelude`]).
fn nif_arg(a: &Arg) -> (&'static str, String) {
    let n = a.name;
    match a.ty {
        Ty::Tensor => ("TRef", format!("&{n}")),
        Ty::OptTensor => ("Opt<TRef>", format!("{n}.as_ref()")),
        Ty::Tensors => ("List<TRef>", format!("&{n}.iter().collect::<Vec<_>>()")),
        Ty::DType => ("Dt", format!("{n}.0")),
        Ty::OptDType => ("Opt<Dt>", format!("{n}.0.map(|d| d.0)")),
        Ty::Axis | Ty::Int => ("Int<isize>", format!("{n}.0")),
        Ty::OptAxis => ("Opt<Int<isize>>", format!("{n}.0.map(|a| a.0)")),
        Ty::Axes | Ty::NewShape => ("Axes", format!("&ints(&{n})")),
        Ty::OptAxes => ("Opt<Axes>", format!("crate::axes(&{n}).as_deref()")),
        Ty::Shape => ("Shape", format!("&{n}.0")),
        Ty::Pair => ("Pair", format!("{n}.0")),
        Ty::Size => ("Int<usize>", format!("{n}.0")),
        Ty::U64 => ("Int<u64>", format!("{n}.0")),
        // Numbers travel as `Scalar` (Nx's :nan / :infinity spellings included).
        Ty::F64 => ("Scalar", format!("{n}.0")),
        Ty::F32 => ("Scalar", format!("{n}.0 as f32")),
        Ty::OptF32 => ("Opt<Scalar>", format!("{n}.0.map(|s| s.0 as f32)")),
        Ty::Bool => ("Flag", format!("{n}.0")),
        // The format travels as its name (lib/kiln.ex turns :q4_0 into "q4_0"); core parses it.
        Ty::Format => ("Text", format!("QuantFormat::parse(&{n}.0)?")),
        Ty::Bytes | Ty::Other(_) => unreachable!("not a plain op"),
    }
}

/// The statement, inside the call, that reads a tensor argument out of its resource (in argument
/// order, so the first freed tensor is the one reported).
fn nif_prelude(a: &Arg) -> Option<String> {
    let n = a.name;
    match a.ty {
        Ty::Tensor => Some(format!("let {n} = {n}.get()?;")),
        Ty::OptTensor => Some(format!("let {n} = opt_get(&{n})?;")),
        Ty::Tensors => {
            Some(format!("let {n} = {n}.0.iter().map(|t| t.get()).collect::<kiln_core::Result<Vec<_>>>()?;"))
        }
        _ => None,
    }
}

/// nif-elixir/native/src/ops_gen.rs: one NIF per plain op, named after kiln-core's function.
pub(crate) fn nif_ops() -> String {
    let mut s = header("//!");
    s += "//! One NIF per plain op of kiln-core's op table (elementwise aside: `unary` / `binary` by name),\n";
    s += "//! named after the core function, its arguments in the core call's order and decoded by\n";
    s += "//! lib.rs's types. lib/kiln/native.ex's list of NIFs has the same names and arities (generated).\n\n";
    s += "// conv2d takes eight arguments with the env (the calling process's session).\n";
    s += "#![allow(clippy::too_many_arguments)]\n\n";
    s += "use crate::{guard, opt_get, tensor_reply, Axes, Dt, Flag, Int, List, Opt, Out, Pair, Reply, Scalar, Shape, TRef, Text};\n";
    s += "use kiln_core::ops::{self, QuantFormat};\nuse rustler::Env;\n\n";
    s += "fn ints(l: &Axes) -> Vec<isize> {\n    l.0.iter().map(|i| i.0).collect()\n}\n";
    for o in nif_plain() {
        let (mut params, mut pre, mut call) = (Vec::new(), Vec::new(), Vec::new());
        for a in o.args {
            let (ty, pass) = nif_arg(a);
            params.push(format!("{}: {ty}", a.name));
            pre.extend(nif_prelude(a));
            call.push(pass);
        }
        let _ = write!(s, "\n/// {}\n", o.doc);
        let _ = writeln!(s, "#[rustler::nif(schedule = \"DirtyIo\")]");
        let call = format!("ops::{}({})", o.core, call.join(", "));
        let names = o.outputs();
        if o.out == Out::PerDim {
            // One tensor per dimension of the input: a list (lib/kiln.ex's `outs` makes it a tuple).
            let _ = writeln!(s, "fn {}(env: Env<'_>, {}) -> Reply<Vec<Out>> {{", o.core, params.join(", "));
            s += "    guard(env, || {\n";
            for p in pre {
                let _ = writeln!(s, "        {p}");
            }
            let _ = writeln!(s, "        Ok({call}?.into_iter().map(Out).collect())\n    }})\n}}");
            continue;
        }
        if names.is_empty() {
            let _ = writeln!(s, "fn {}(env: Env<'_>, {}) -> Reply<Out> {{", o.core, params.join(", "));
            s += "    tensor_reply(env, || {\n";
        } else {
            // A named tuple: a list in its order (lib/kiln.ex's `outs` makes it a tuple).
            let _ = writeln!(s, "fn {}(env: Env<'_>, {}) -> Reply<Vec<Out>> {{", o.core, params.join(", "));
            s += "    guard(env, || {\n";
        }
        for p in pre {
            let _ = writeln!(s, "        {p}");
        }
        if names.is_empty() {
            let _ = writeln!(s, "        {call}\n    }})\n}}");
        } else {
            let wrapped: Vec<String> = names.iter().map(|n| format!("Out({n})")).collect();
            let _ = writeln!(
                s,
                "        let {} = {call}?;\n        Ok(vec![{}])\n    }})\n}}",
                o.out_pattern(),
                wrapped.join(", ")
            );
        }
    }
    s
}

/// The region of lib/kiln/native.ex's NIF list: the generated NIFs' names and arities.
pub(crate) fn native_nifs() -> String {
    let mut s = String::new();
    for o in nif_plain() {
        let _ = writeln!(s, "    {}: {},", o.core, o.args.len());
    }
    s
}

/// The ops whose `Kiln` function is generated: an Elixir name without `~` in the row. Their
/// form is Nx's: the arguments without a default positional (in the row's order), the others
/// keyword options with the row's defaults.
pub(crate) fn ex_plain() -> Vec<OpInfo> {
    nif_plain().into_iter().filter(|o| !o.hand_written(1)).collect()
}

/// Whether `a` is a positional argument of the Elixir function: no default in the row, nor an
/// Elixir one (`Arg::nx`).
fn ex_required(a: &Arg) -> bool {
    a.default == Dflt::Required && a.nx.is_empty()
}

/// The option name of `a` in Elixir: Nx's spelling where it differs from the row's
/// (`keep_axes:` / `keep_axis:`, `type:`).
fn ex_option(o: &OpInfo, a: &Arg) -> &'static str {
    match (a.name, a.ty) {
        ("keepdims", _) if o.args.iter().any(|b| b.ty == Ty::OptAxis) => "keep_axis",
        ("keepdims", _) => "keep_axes",
        (_, Ty::OptDType | Ty::DType) => "type",
        (n, _) => n,
    }
}

/// An f64 as an Elixir float literal (`1.0e-5`, `10000.0`).
fn ex_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
            _ => s,
        }
    }
}

/// `a`'s default as an Elixir term (Nx's where the row says, `Arg::nx`).
fn ex_default(a: &Arg) -> String {
    if !a.nx.is_empty() {
        return a.nx.into();
    }
    match a.default {
        Dflt::None => "nil".into(),
        Dflt::Bool(b) => b.to_string(),
        Dflt::Int(i) if matches!(a.ty, Ty::F32 | Ty::F64) => ex_float(i as f64),
        Dflt::Int(i) => i.to_string(),
        Dflt::Float(f) => ex_float(f),
        // nil: the other argument's value (`kw[:stride] || kernel`).
        Dflt::Same(_) => "nil".into(),
        Dflt::Required => unreachable!("checked by ex_supported"),
    }
}

/// The checked conversion of the value `v` of `a` for its NIF (lib/kiln.ex's helpers: each
/// raises `Kiln.Error` naming the argument).
fn ex_convert(a: &Arg, v: &str) -> String {
    let n = a.name;
    match a.ty {
        Ty::Tensor => format!("ref!({v})"),
        Ty::OptTensor => format!("opt_ref({v})"),
        Ty::DType => format!("native_type({v})"),
        Ty::OptDType => format!("opt_native_type({v})"),
        Ty::Axis | Ty::Int => format!("int!({v}, \"{n}\")"),
        Ty::OptAxis => format!("opt_int!({v}, \"{n}\")"),
        Ty::Axes | Ty::OptAxes => format!("axes!({v})"),
        Ty::Shape => format!("shape_list!({v})"),
        Ty::Pair => format!("pair!({v}, \"{n}\")"),
        Ty::Size => format!("size!({v}, \"{n}\")"),
        Ty::F64 | Ty::F32 => format!("float!({v}, \"{n}\")"),
        Ty::OptF32 => format!("opt_float!({v}, \"{n}\")"),
        Ty::Bool => format!("{v} == true"),
        Ty::Format => format!("quant_format!({v})"),
        Ty::U64 => format!("seed!({v})"),
        Ty::Tensors => format!("Enum.map(proper_list!({v}, \"{n}\"), &ref!/1)"),
        Ty::NewShape | Ty::Bytes | Ty::Other(_) => unreachable!("checked by ex_supported"),
    }
}

/// Whether `o`'s Elixir function can be generated (kiln-gen refuses a row asking for it otherwise).
pub(crate) fn ex_supported(o: &OpInfo) -> bool {
    o.is_plain()
        && o.args.iter().all(|a| {
            !matches!(a.ty, Ty::NewShape | Ty::Bytes | Ty::Other(_))
                // Another argument's value as the default: that argument must be positional.
                && match a.default {
                    Dflt::Same(other) => o.args.iter().any(|b| b.name == other && ex_required(b)),
                    _ => true,
                }
        })
}

/// lib/kiln.ex's line length (nif-elixir/.formatter.exs).
const EX_LINE: usize = 110;

fn ex_doc_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace("#{", "\\#{")
}

/// The second region of lib/kiln.ex: one function per op of [`ex_plain`], and an alias under
/// kiln-core's name where the Elixir name differs.
pub(crate) fn elixir_fns() -> String {
    let mut s = String::new();
    for o in ex_plain() {
        let required: Vec<&Arg> = o.args.iter().filter(|a| ex_required(a)).collect();
        let options: Vec<&Arg> = o.args.iter().filter(|a| !ex_required(a)).collect();
        let mut doc = String::new();
        let mut first = o.doc.chars();
        if let Some(c) = first.next() {
            doc.extend(c.to_uppercase());
            doc += first.as_str();
        }
        doc += &format!(" (kiln-core's `{}`; dtypes: {}).", o.name, o.dtypes);
        s += &format!("  @doc \"\"\"\n  {}\n", ex_doc_text(&doc));
        if !options.is_empty() {
            s += "\n  Options:\n\n";
            for a in &options {
                s += &format!(
                    "    * `{}:` (default `{}`): {}\n",
                    ex_option(&o, a),
                    if let Dflt::Same(other) = a.default { other.to_string() } else { ex_default(a) },
                    ex_doc_text(a.doc)
                );
            }
        }
        s += "  \"\"\"\n";
        let params: Vec<String> = required.iter().map(|a| a.name.to_string()).collect();
        let call: Vec<String> = o
            .args
            .iter()
            .map(|a| match a.default {
                _ if ex_required(a) => ex_convert(a, a.name),
                Dflt::Same(other) => ex_convert(a, &format!("kw[:{}] || {other}", ex_option(&o, a))),
                _ => ex_convert(a, &format!("kw[:{}]", ex_option(&o, a))),
            })
            .collect();
        // A named tuple comes back as an Elixir tuple in its order (`outs`).
        let wrap = if o.outputs().is_empty() { "out" } else { "outs" };
        let native = format!("{wrap}(Native.{}({}))", o.core, call.join(", "));
        // As `mix format` (line_length 110) writes them, so that lint-elixir passes.
        let broken = |indent: &str| {
            let mut b = format!("{indent}{wrap}(\n{indent}  Native.{}(\n", o.core);
            for (i, c) in call.iter().enumerate() {
                let sep = if i + 1 < call.len() { "," } else { "" };
                b += &format!("{indent}    {c}{sep}\n");
            }
            b + &format!("{indent}  )\n{indent})\n")
        };
        let head = format!("  def {}({}", o.ex(), params.join(", "));
        if options.is_empty() {
            let one = format!("{head}), do: {native}");
            if one.len() <= EX_LINE {
                s += &format!("{one}\n");
            } else if native.len() + 8 <= EX_LINE {
                s += &format!("{head}),\n    do: {native}\n");
            } else {
                s += &format!("{head}) do\n{}  end\n", broken("    "));
            }
        } else {
            let kw: Vec<String> = options.iter().map(|a| format!("{}: {}", ex_option(&o, a), ex_default(a))).collect();
            let sep = if params.is_empty() { "" } else { ", " };
            s += &format!("{head}{sep}opts \\\\ []) do\n");
            s += &format!("    kw = opts!(opts, {})\n", kw.join(", "));
            if native.len() + 4 <= EX_LINE {
                s += &format!("    {native}\n");
            } else {
                s += &format!("\n{}", broken("    "));
            }
            s += "  end\n";
        }
        if o.ex() != o.name {
            let args: Vec<&str> =
                required.iter().map(|a| a.name).chain((!options.is_empty()).then_some("opts")).collect();
            let defs: Vec<String> = required
                .iter()
                .map(|a| a.name.to_string())
                .chain((!options.is_empty()).then(|| "opts \\\\ []".to_string()))
                .collect();
            s += &format!("\n  @doc \"kiln-core's name for `{}/{}`.\"\n", o.ex(), args.len());
            s += &format!("  def {}({}), do: {}({})\n", o.name, defs.join(", "), o.ex(), args.join(", "));
        }
        s += "\n";
    }
    s
}

/// The region of tests/conformance/ex_runner.exs: one `case` clause per op of [`ex_plain`],
/// calling its `Kiln` function with the manifest's inputs and parameters (by their keys).
pub(crate) fn ex_runner() -> String {
    let mut s = String::new();
    for o in ex_plain() {
        let value = |a: &Arg| -> String {
            let k = a.key;
            match a.ty {
                Ty::Tensor | Ty::OptTensor => format!("get.(\"{k}\")"),
                Ty::Tensors => "Enum.map(ins, &elem(&1, 1))".into(),
                Ty::Pair => format!("pair(p[\"{k}\"])"),
                Ty::DType => format!("t(p, \"{k}\")"),
                Ty::OptDType => format!("opt_t(p, \"{k}\")"),
                Ty::Format => format!("String.to_atom(p[\"{k}\"])"),
                _ => format!("p[\"{k}\"]"),
            }
        };
        let mut args: Vec<String> = o.args.iter().filter(|a| ex_required(a)).map(value).collect();
        let opts: Vec<String> =
            o.args.iter().filter(|a| !ex_required(a)).map(|a| format!("{}: {}", ex_option(&o, a), value(a))).collect();
        if !opts.is_empty() {
            args.push(opts.join(", "));
        }
        // A named tuple: the case's `output` element.
        let pick = if o.outputs().is_empty() { "" } else { " |> elem(p[\"output\"])" };
        let _ = writeln!(s, "      \"{}\" -> Kiln.{}({}){pick}", o.name, o.ex(), args.join(", "));
    }
    s
}

/// nif-elixir/native/src/session_gen.rs: `session_open`, one argument per session limit.
pub(crate) fn nif_session() -> String {
    let fields = SessionLimits::fields();
    let mut s = header("//!");
    s += "//! `session_open`: one argument per field of kiln-core's `SessionLimits::fields()`, in its order\n";
    s += "//! (lib/kiln/session.ex's `@limits`, generated from the same list, passes them so).\n\n";
    s += "use crate::session::{open, SessionRes};\nuse crate::{Flag, Int};\n";
    s += "use kiln_core::{SessionLimits, ShaderPolicy};\nuse rustler::ResourceArc;\n\n";
    s += "#[allow(clippy::too_many_arguments)]\n#[rustler::nif]\nfn session_open(\n";
    for f in &fields {
        let ty = match f.ty {
            LimitTy::U64 => "Int<u64>",
            LimitTy::U32 => "Int<u32>",
            LimitTy::Usize => "Int<usize>",
            LimitTy::Bool => "Flag",
        };
        let _ = writeln!(s, "    {}: {ty},", f.name);
    }
    s += ") -> ResourceArc<SessionRes> {\n    open(SessionLimits {\n";
    for f in fields.iter().filter(|f| !f.in_policy) {
        let _ = writeln!(s, "        {0}: {0}.0,", f.name);
    }
    s += "        policy: ShaderPolicy {\n";
    for f in fields.iter().filter(|f| f.in_policy) {
        let _ = writeln!(s, "            {0}: {0}.0,", f.name);
    }
    s += "        },\n    })\n}\n";
    s
}

/// The region of lib/kiln/session.ex's `@limits`: `{option, default, kind}` per session limit,
/// in the NIF's order.
pub(crate) fn session_limits() -> String {
    let fields = SessionLimits::fields();
    let mut s = String::new();
    for (i, f) in fields.iter().enumerate() {
        let (default, kind) = match f.ty {
            LimitTy::U64 | LimitTy::Usize => ("0", "u64"),
            LimitTy::U32 => ("0", "u32"),
            LimitTy::Bool => ("true", "bool"),
        };
        let sep = if i + 1 < fields.len() { "," } else { "" };
        let _ = writeln!(s, "    {}: {{{default}, :{kind}}}{sep}", f.name);
    }
    s
}
