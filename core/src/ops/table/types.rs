//! The op table's types: an argument's type ([`Ty`]), default ([`Dflt`]) and row ([`Arg`]), an
//! op's outputs ([`Out`]) and row ([`OpInfo`]) with the builders the rows are written with.

/// The type of one argument, as every binding spells it. Rust types in the comments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `&Tensor`, an input.
    Tensor,
    /// `Option<&Tensor>`, an input that may be left out.
    OptTensor,
    /// `&[&Tensor]`, one or more inputs.
    Tensors,
    /// Raw bytes on the host (`&[u8]`).
    Bytes,
    /// `DType`.
    DType,
    /// `Option<DType>`.
    OptDType,
    /// `isize`, an axis (negative counts from the end).
    Axis,
    /// `Option<isize>`: None is every axis, flattened.
    OptAxis,
    /// `&[isize]`, axes.
    Axes,
    /// `Option<&[isize]>`: None is every axis.
    OptAxes,
    /// `&[usize]`, a shape.
    Shape,
    /// `&[isize]`, a shape where one entry may be -1.
    NewShape,
    /// `[usize; 2]`, (height, width).
    Pair,
    /// `usize`, a count or size.
    Size,
    /// `isize`, a signed index.
    Int,
    /// `u64`.
    U64,
    /// `f64`.
    F64,
    /// `f32`.
    F32,
    /// `Option<f32>`.
    OptF32,
    /// `bool`.
    Bool,
    /// `QuantFormat`, one of [`super::QuantFormat`]'s names ("q4_0", …).
    Format,
    /// What the table cannot express yet (the text says what it is): every binding writes the op by
    /// hand.
    Other(&'static str),
}

impl Ty {
    /// The Rust type (docs/ops-api.md); None: the argument is written by its bare name (shape,
    /// dtype, format).
    pub fn rust(self) -> Option<&'static str> {
        Some(match self {
            Ty::Tensor => "&Tensor",
            Ty::OptTensor => "Option<&Tensor>",
            Ty::Tensors => "&[&Tensor]",
            Ty::Bytes => "&[u8]",
            Ty::DType | Ty::Shape | Ty::Format => return None,
            Ty::OptDType => "Option<DType>",
            Ty::Axis | Ty::Int => "isize",
            Ty::OptAxis => "Option<isize>",
            Ty::Axes | Ty::NewShape => "&[isize]",
            Ty::OptAxes => "Option<&[isize]>",
            Ty::Pair => "[usize; 2]",
            Ty::Size => "usize",
            Ty::U64 => "u64",
            Ty::F64 => "f64",
            Ty::F32 => "f32",
            Ty::OptF32 => "Option<f32>",
            Ty::Bool => "bool",
            Ty::Other(t) => t,
        })
    }
    /// An input tensor the op needs (counted in [`OpInfo::arity`]).
    pub fn is_input(self) -> bool {
        matches!(self, Ty::Tensor | Ty::Tensors)
    }
}

/// A default value; [`Dflt::Required`] has none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dflt {
    Required,
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// The value of another argument (max_pool2d's stride is its kernel).
    Same(&'static str),
}

impl Dflt {
    /// The default as Rust writes it ("None", "false", "1e-5", "-inf", "kernel"); None when required.
    pub fn text(self) -> Option<String> {
        Some(match self {
            Dflt::Required => return None,
            Dflt::None => "None".into(),
            Dflt::Bool(b) => b.to_string(),
            Dflt::Int(i) => i.to_string(),
            Dflt::Float(f) if f.is_infinite() => if f > 0.0 { "inf" } else { "-inf" }.into(),
            Dflt::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            Dflt::Float(f) => format!("{f:e}"),
            Dflt::Same(s) => s.into(),
        })
    }
}

/// One argument of an op, in the core function's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg {
    /// The name in every binding (the C parameter, the Python keyword, …).
    pub name: &'static str,
    pub ty: Ty,
    pub default: Dflt,
    /// One line saying what it is.
    pub doc: &'static str,
    /// The key of the conformance manifest and of `by_name` where it differs from `name`.
    pub key: &'static str,
    /// The C parameters' stem where it differs from `name` (conv2d's `padding` is `pad_h`, `pad_w`).
    pub c_stem: &'static str,
    /// A tensor of 0-based positions (ids, indices): a 1-based binding (Julia) takes its own.
    pub positions: bool,
    /// The Python keyword where it differs from `name` (PyTorch's `kernel_size`); empty: `name`.
    pub py: &'static str,
    /// Elixir's default, an Elixir term, where Nx's differs from the row's (`0` for a scan's
    /// axis) or Nx has one where the row has none (`{:f, 32}` for a new tensor's type); empty:
    /// the row's.
    pub nx: &'static str,
}

impl Arg {
    /// With its default.
    pub const fn or(mut self, d: Dflt) -> Self {
        self.default = d;
        self
    }
    /// Named `key` in the conformance manifest and `by_name`.
    pub const fn key(mut self, key: &'static str) -> Self {
        self.key = key;
        self
    }
    /// Named `name` in Python ([`Arg::py`]).
    pub const fn py(mut self, name: &'static str) -> Self {
        self.py = name;
        self
    }
    /// A tensor of positions ([`Arg::positions`]).
    pub const fn positions(mut self) -> Self {
        self.positions = true;
        self
    }
    /// Elixir's default ([`Arg::nx`]).
    pub const fn nx(mut self, term: &'static str) -> Self {
        self.nx = term;
        self
    }
    /// Its C parameters named after `stem`.
    pub const fn c_stem(mut self, stem: &'static str) -> Self {
        self.c_stem = stem;
        self
    }
    /// The Rust form for docs/ops-api.md: `name: type = default`.
    pub fn signature(&self) -> String {
        let mut s = match self.ty.rust() {
            Some(t) => format!("{}: {t}", self.name),
            None => self.name.to_string(),
        };
        if let Some(d) = self.default.text() {
            s += " = ";
            s += &d;
        }
        s
    }
}

/// An argument without default: `a(name, type, doc)`.
pub const fn a(name: &'static str, ty: Ty, doc: &'static str) -> Arg {
    Arg { name, ty, default: Dflt::Required, doc, key: name, c_stem: name, positions: false, py: "", nx: "" }
}

/// What an op gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Out {
    /// One tensor.
    One,
    /// A tuple of tensors, named.
    Tuple(&'static [&'static str]),
    /// One tensor per dimension of the input (nonzero).
    PerDim,
}

/// One op of the shared API, as every binding names and documents it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpInfo {
    /// The core name (C adds `kiln_`).
    pub name: &'static str,
    pub family: &'static str,
    /// The dtypes it takes: "any" (every dtype but bool unless it says so), "float" (f32, f16),
    /// "int" (i32, u32) or a phrase.
    pub dtypes: &'static str,
    /// Every argument (tensors included) in the order of the core function.
    pub args: &'static [Arg],
    /// Said after the parameters in docs/ops-api.md (another form of the op).
    pub note: &'static str,
    /// Why the by-name arm and the C function are written by hand although every argument has a
    /// table type (empty: they are generated).
    pub hand: &'static str,
    pub out: Out,
    /// The core function (`kiln_core::ops::…`).
    pub core: &'static str,
    /// The struct (`kiln_core::ops::…`) the core function gives for a named tuple, its fields
    /// named as the outputs (empty: a Rust tuple in their order).
    pub core_struct: &'static str,
    /// One line saying what it computes.
    pub doc: &'static str,
    /// The C header's comment before the ownership sentence (which is the same for every op and
    /// added by the generator); empty: the C function is not generated from this row.
    pub c_doc: &'static str,
    /// The Python docstring of a generated Python wrapper (reST, as the hand-written ones);
    /// empty: Python's wrapper is written by hand (`~` in `names`).
    pub py_doc: &'static str,
    /// Python takes the Array API's form: the tensor inputs positional-only, every other
    /// argument keyword-only, `axes` spelled `axis` (numpy's reductions); said of a hand-written
    /// wrapper too (the conformance runner calls it so).
    pub py_array_api: bool,
    /// Python's wrapper is numpy's creation function (`shape, dtype=None, *, device=None`, the dtype
    /// float32 by default, made on `device`) with its `<name>_like` twin, generated.
    pub py_creation: bool,
    /// The generated Python wrapper is the private `_<name>` that kiln's Python code wraps (its
    /// own idiom: `side=`, the two operands' promotion), not the public function.
    pub py_private: bool,
    /// Why Python's wrapper (hand-written) cannot be called with the row's arguments, by position
    /// or in the Array API's form (empty: it can; the conformance runner calls it from the row).
    pub py_own: &'static str,
    /// The Julia docstring of a generated Kiln.jl method (julia/src/methods_gen.jl: Julia's
    /// `dims`, (width, height) pairs, 1-based positions); empty: Kiln.jl's method is written by
    /// hand (`~` in `names`).
    pub jl_doc: &'static str,
    /// How the conformance runner sees that Kiln.jl exposes the op, where its Julia name on one
    /// Float32 matrix does not show it: `;`-separated checks, each a method Kiln.jl must own,
    /// `f(T, …)` (`KA` a Float32 matrix, `KB` a Bool one), or `:name`, a function of Kiln's own.
    /// A generated Kiln.jl method (`jl_doc`) adds its own `:name`.
    pub jl_owns: &'static str,
    /// The outputs of a named tuple that are 0-based positions along the axis (a 1-based
    /// binding adds 1).
    pub position_outputs: &'static [&'static str],
    /// `[python, elixir, julia]` names; a leading `~` marks a hand-written wrapper in that
    /// binding (other semantics or extra parameters), which `kiln-gen` lists but does not write
    /// (one `~` only: Julia's `~` written by hand is `~~`); `~` alone is the op's own name,
    /// hand-written.
    pub names: [&'static str; 3],
}

impl OpInfo {
    /// Binding `i`'s name (0 Python, 1 Elixir, 2 Julia) without the `~` mark.
    fn binding(&self, i: usize) -> &'static str {
        match self.names[i] {
            "~" => self.name,
            n => n.strip_prefix('~').unwrap_or(n),
        }
    }
    /// Whether binding `i` (0 Python, 1 Elixir, 2 Julia) writes the op by hand.
    pub fn hand_written(&self, i: usize) -> bool {
        self.names[i].starts_with('~')
    }
    /// The Python name (without the `~` mark).
    pub fn py(&self) -> &'static str {
        self.binding(0)
    }
    /// The Elixir name: Nx's where Nx has the op (`subtract`, `greater_equal`, …).
    pub fn ex(&self) -> &'static str {
        self.binding(1)
    }
    /// The Julia function (Base's where Base has it).
    pub fn jl(&self) -> &'static str {
        self.binding(2)
    }
    /// Tensor inputs (0 for creation ops; concat's list counts 1).
    pub fn arity(&self) -> usize {
        self.args.iter().filter(|a| a.ty.is_input()).count()
    }
    /// The arguments after the input tensors (optional tensors included).
    pub fn params(&self) -> impl Iterator<Item = &'static Arg> {
        self.args.iter().filter(|a| !a.ty.is_input())
    }
    /// Whether a plain call covers it: one output, a named tuple of them or one per dimension of
    /// its input, and every argument a type of the table (the generated by-name dispatch and C
    /// wrapper exist exactly for these).
    pub fn is_plain(&self) -> bool {
        self.hand.is_empty() && self.args.iter().all(|a| !matches!(a.ty, Ty::Other(_) | Ty::Bytes))
    }
    /// The Rust pattern that takes the core function's named tuple apart into its outputs' names:
    /// `(values, counts)`, or `ops::Unique { values, … }` for a [`OpInfo::core_struct`].
    pub fn out_pattern(&self) -> String {
        let names = self.outputs().join(", ");
        if self.core_struct.is_empty() {
            format!("({names})")
        } else {
            format!("ops::{} {{ {names} }}", self.core_struct)
        }
    }
    /// The names of the tensors it gives when it gives several ([`Out::Tuple`]); empty for one
    /// (and for [`Out::PerDim`], whose count depends on the input).
    pub fn outputs(&self) -> &'static [&'static str] {
        match self.out {
            Out::Tuple(names) => names,
            Out::One | Out::PerDim => &[],
        }
    }
    pub(super) const fn new(
        name: &'static str,
        family: &'static str,
        dtypes: &'static str,
        args: &'static [Arg],
    ) -> Self {
        OpInfo {
            name,
            family,
            dtypes,
            args,
            note: "",
            hand: "",
            out: Out::One,
            core: name,
            core_struct: "",
            doc: "",
            c_doc: "",
            py_doc: "",
            py_array_api: false,
            py_own: "",
            py_private: false,
            py_creation: false,
            jl_doc: "",
            position_outputs: &[],
            jl_owns: "",
            names: ["~", "~", "~"],
        }
    }
    pub(super) const fn doc(mut self, doc: &'static str) -> Self {
        self.doc = doc;
        self
    }
    pub(super) const fn c(mut self, c_doc: &'static str) -> Self {
        self.c_doc = c_doc;
        self
    }
    /// Python's wrapper generated, under the op's name, with this docstring.
    pub(super) const fn python(mut self, doc: &'static str) -> Self {
        self.py_doc = doc;
        self.names[0] = self.name;
        self
    }
    /// Python's wrapper in the Array API's form ([`OpInfo::py_array_api`]), with this docstring.
    pub(super) const fn array_api(mut self, doc: &'static str) -> Self {
        self.py_array_api = true;
        self.python(doc)
    }
    /// Python's wrapper generated under the name `name` (numpy's where it differs: `swapaxes` for
    /// transpose), with this docstring.
    pub(super) const fn python_named(mut self, name: &'static str, doc: &'static str) -> Self {
        self.py_doc = doc;
        self.names[0] = name;
        self
    }
    /// Python's creation function and its `_like` twin generated ([`OpInfo::py_creation`]), with
    /// this docstring.
    pub(super) const fn python_creation(mut self, doc: &'static str) -> Self {
        self.py_doc = doc;
        self.py_creation = true;
        self.names[0] = self.name;
        self
    }
    /// Python's row-form wrapper generated as the private `_<name>` ([`OpInfo::py_private`]), with
    /// this docstring; the public function stays hand-written.
    pub(super) const fn python_private(mut self, doc: &'static str) -> Self {
        self.py_doc = doc;
        self.py_private = true;
        self
    }
    /// Python's hand-written wrapper takes the Array API's form ([`OpInfo::py_array_api`]).
    pub(super) const fn py_keywords(mut self) -> Self {
        self.py_array_api = true;
        self
    }
    /// Python's hand-written wrapper is called its own way ([`OpInfo::py_own`]).
    pub(super) const fn py_own(mut self, why: &'static str) -> Self {
        self.py_own = why;
        self
    }
    /// Kiln.jl's method generated, under the op's name, with this docstring.
    pub(super) const fn julia(mut self, doc: &'static str) -> Self {
        self.jl_doc = doc;
        self.names[2] = self.name;
        self
    }
    /// Kiln.jl's method generated under the Julia name `name` (Base's or Flux's where it
    /// differs: `rand` for random_uniform), with this docstring.
    pub(super) const fn julia_named(mut self, name: &'static str, doc: &'static str) -> Self {
        self.jl_doc = doc;
        self.names[2] = name;
        self
    }
    /// How Kiln.jl shows it exposes the op ([`OpInfo::jl_owns`]).
    pub(super) const fn jl_owns(mut self, checks: &'static str) -> Self {
        self.jl_owns = checks;
        self
    }
    /// The outputs that are positions ([`OpInfo::position_outputs`]).
    pub(super) const fn position_outputs(mut self, names: &'static [&'static str]) -> Self {
        self.position_outputs = names;
        self
    }
    /// Elixir's `Kiln` function generated under `name` (Nx's form: required arguments
    /// positional, the others keyword options with the row's defaults).
    pub(super) const fn elixir(mut self, name: &'static str) -> Self {
        self.names[1] = name;
        self
    }
    pub(super) const fn names(mut self, names: [&'static str; 3]) -> Self {
        self.names = names;
        self
    }
    pub(super) const fn core(mut self, core: &'static str) -> Self {
        self.core = core;
        self
    }
    /// The core function gives its named tuple as the struct `name` ([`OpInfo::core_struct`]).
    pub(super) const fn core_struct(mut self, name: &'static str) -> Self {
        self.core_struct = name;
        self
    }
    pub(super) const fn out(mut self, out: Out) -> Self {
        self.out = out;
        self
    }
    pub(super) const fn note(mut self, note: &'static str) -> Self {
        self.note = note;
        self
    }
    pub(super) const fn hand(mut self, why: &'static str) -> Self {
        self.hand = why;
        self
    }
}
