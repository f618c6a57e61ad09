//! The Elixir NIF of Kiln (module `Kiln.Native`), Explorer style: no op logic here, only term
//! conversion, resource handling and error mapping. Every function that may wait on the GPU (or
//! compile a pipeline) runs on a dirty scheduler, and every body runs under `catch_unwind`, so a
//! panic becomes `{:error, {:panic, 12, msg}}` instead of taking the VM down.
//!
//! Replies: `{:ok, value} | {:error, {code_atom, code_number, message}}`; a tensor travels as
//! `{resource, shape_list, dtype_atom}` and `lib/kiln.ex` wraps it in `%Kiln.Tensor{}`.
//!
//! Arguments are decoded by the types below (`Int`, `List`, `Pair`, `Scalar`, `Text`, `Dt`,
//! `TRef`, ...), never by rustler's own decoders: a term of the wrong type or out of range (an
//! integer beyond 64 bits, a negative size, a binary that is not UTF-8) becomes
//! `{:error, {:invalid_argument, 1, message}}`, so Elixir raises `Kiln.Error` naming the value
//! instead of a bare `ArgumentError`.

use kiln_core::{DType, Error, ErrorCode, Tensor};
use rustler::{Atom, Decoder, Encoder, Env, NifResult, ResourceArc, Term, TermType};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

mod conv;
mod creation;
mod elementwise;
mod kernel;
mod matmul;
mod movement;
mod nn;
mod norm;
mod random;
mod reduce;

mod atoms {
    rustler::atoms! {
        f32, f16, i32, u32,
        infinity, neg_infinity, nan,
        invalid_argument, null_pointer, shape_mismatch, dtype_mismatch, out_of_memory,
        quota_exceeded, shader, device_lost, no_adapter, timeout, unsupported, panic, internal, ok,
    }
}

// ---------------------------------------------------------------------------------------------
// Errors: the one place where kiln_core::ErrorCode becomes a Kiln.Error code.

/// `{code_atom, code_number, message}`, the payload of `{:error, _}` and of `%Kiln.Error{}`.
pub struct KError(pub Error);

fn code_atom(code: ErrorCode) -> Atom {
    match code {
        ErrorCode::Ok => atoms::ok(),
        ErrorCode::InvalidArgument => atoms::invalid_argument(),
        ErrorCode::NullPointer => atoms::null_pointer(),
        ErrorCode::ShapeMismatch => atoms::shape_mismatch(),
        ErrorCode::DTypeMismatch => atoms::dtype_mismatch(),
        ErrorCode::OutOfMemory => atoms::out_of_memory(),
        ErrorCode::QuotaExceeded => atoms::quota_exceeded(),
        ErrorCode::Shader => atoms::shader(),
        ErrorCode::DeviceLost => atoms::device_lost(),
        ErrorCode::NoAdapter => atoms::no_adapter(),
        ErrorCode::Timeout => atoms::timeout(),
        ErrorCode::Unsupported => atoms::unsupported(),
        ErrorCode::Panic => atoms::panic(),
        ErrorCode::Internal => atoms::internal(),
    }
}

impl Encoder for KError {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let code = self.0.code();
        (code_atom(code), code as u32, self.0.message()).encode(env)
    }
}

pub type Reply<T> = Result<T, KError>;

/// Runs `f`, turning a panic into `Error::Panic` (the VM never sees it).
pub fn guard<T>(f: impl FnOnce() -> kiln_core::Result<T>) -> Reply<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(KError),
        Err(payload) => Err(KError(Error::from_panic(payload))),
    }
}

// ---------------------------------------------------------------------------------------------
// Term conversion.

/// A decoding failure as `{:error, {:invalid_argument, 1, "<what>, got <term>"}}`: `Kiln.unwrap!`
/// raises it as `Kiln.Error`.
pub fn bad_arg(term: Term, what: &str) -> rustler::Error {
    let mut shown = describe(term);
    if shown.len() > 200 {
        let mut cut = 200;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    rustler::Error::Term(Box::new(KError(Error::InvalidArgument(format!("{what}, got {shown}")))))
}

/// A short picture of a term for an error message: printed in full when small, summarised when
/// it is a large binary, list, tuple or map (printing a 100 MB binary would take a while).
fn describe(term: Term) -> String {
    match term.get_type() {
        TermType::Binary => match term.decode::<rustler::Binary>() {
            Ok(b) if b.len() > 64 => format!("a binary of {} bytes", b.len()),
            _ => format!("{term:?}"),
        },
        TermType::List => match term.list_length() {
            Ok(n) if n > 16 => format!("a list of {n} elements"),
            Ok(_) => format!("{term:?}"),
            Err(_) => "an improper list".to_string(),
        },
        TermType::Tuple => match rustler::types::tuple::get_tuple(term) {
            Ok(t) if t.len() > 8 => format!("a tuple of {} elements", t.len()),
            _ => format!("{term:?}"),
        },
        TermType::Map => match term.map_size() {
            Ok(n) if n > 8 => format!("a map of {n} entries"),
            _ => format!("{term:?}"),
        },
        _ => format!("{term:?}"),
    }
}

/// An integer that fits 64 bits (signed or unsigned), or None (a float, a bignum, not a number).
fn int_of(term: Term) -> Option<i128> {
    if term.get_type() != TermType::Integer {
        return None;
    }
    term.decode::<i64>().map(i128::from).or_else(|_| term.decode::<u64>().map(i128::from)).ok()
}

/// The integer types an `Int` argument can be, with the range named in its error.
pub trait IntTarget: Sized + TryFrom<i128> + 'static {
    const RANGE: &'static str;
}

impl IntTarget for usize {
    const RANGE: &'static str = "a non-negative integer below 2^64";
}
impl IntTarget for isize {
    const RANGE: &'static str = "an integer from -2^63 to 2^63-1";
}
impl IntTarget for u64 {
    const RANGE: &'static str = "an integer from 0 to 2^64-1";
}
impl IntTarget for u32 {
    const RANGE: &'static str = "an integer from 0 to 2^32-1";
}

/// An integer argument (size, axis, count, seed) in `T`'s range.
pub struct Int<T>(pub T);

impl<'a, T: IntTarget> Decoder<'a> for Int<T> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        int_of(term).and_then(|v| T::try_from(v).ok()).map(Int).ok_or_else(|| bad_arg(term, &format!("expected {}", T::RANGE)))
    }
}

/// The elements of a proper list; None for anything else. (rustler's `Vec` decoder panics on an
/// improper list such as `[1 | 2]`; `enif_get_list_length` refuses one.)
fn list_items<'a>(term: Term<'a>) -> Option<Vec<Term<'a>>> {
    term.list_length().ok()?;
    term.decode().ok()
}

/// A list argument whose elements decode as `T` (shapes, axes, tensors).
pub struct List<T>(pub Vec<T>);

impl<'a, T: Decoder<'a>> Decoder<'a> for List<T> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let items = list_items(term).ok_or_else(|| bad_arg(term, "expected a list"))?;
        items.into_iter().map(T::decode).collect::<NifResult<Vec<T>>>().map(List)
    }
}

/// A shape: a list of non-negative integers below 2^64.
pub struct Shape(pub Vec<usize>);

impl<'a> Decoder<'a> for Shape {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let what = "a shape is a list of non-negative integers below 2^64";
        let items = list_items(term).ok_or_else(|| bad_arg(term, what))?;
        items
            .into_iter()
            .map(|d| int_of(d).and_then(|v| usize::try_from(v).ok()).ok_or_else(|| bad_arg(term, what)))
            .collect::<NifResult<Vec<usize>>>()
            .map(Shape)
    }
}

/// An optional argument: `nil`, or a `T` (whose own error is kept; rustler's `Option` decoder
/// would turn it into a bare badarg).
pub struct Opt<T>(pub Option<T>);

impl<'a, T: Decoder<'a>> Decoder<'a> for Opt<T> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        if term.atom_to_string().is_ok_and(|a| a == "nil") {
            return Ok(Opt(None));
        }
        T::decode(term).map(|v| Opt(Some(v)))
    }
}

impl<T> Opt<T> {
    pub fn as_ref(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

/// A list of axes (`Vec<isize>`).
pub type Axes = List<Int<isize>>;

pub fn axes(a: &Opt<Axes>) -> Option<Vec<isize>> {
    a.as_ref().map(|l| l.0.iter().map(|i| i.0).collect())
}

/// A pair `{h, w}` of non-negative integers (conv and pool geometry).
pub struct Pair(pub [usize; 2]);

impl<'a> Decoder<'a> for Pair {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let what = "expected a pair {h, w} of non-negative integers below 2^64";
        let items = rustler::types::tuple::get_tuple(term).map_err(|_| bad_arg(term, what))?;
        match items.as_slice() {
            [h, w] => match (int_of(*h).and_then(|v| usize::try_from(v).ok()), int_of(*w).and_then(|v| usize::try_from(v).ok())) {
                (Some(h), Some(w)) => Ok(Pair([h, w])),
                _ => Err(bad_arg(term, what)),
            },
            _ => Err(bad_arg(term, what)),
        }
    }
}

/// Workgroup counts `{x, y, z}`, each in u32.
pub struct Groups(pub [u32; 3]);

impl<'a> Decoder<'a> for Groups {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let what = "workgroups are {x, y, z}, each an integer from 0 to 2^32-1";
        let items = rustler::types::tuple::get_tuple(term).map_err(|_| bad_arg(term, what))?;
        let v: Vec<u32> = items.iter().map(|t| int_of(*t).and_then(|v| u32::try_from(v).ok())).collect::<Option<_>>().ok_or_else(|| bad_arg(term, what))?;
        match v.as_slice() {
            [x, y, z] => Ok(Groups([*x, *y, *z])),
            _ => Err(bad_arg(term, what)),
        }
    }
}

/// `true` or `false`.
pub struct Flag(pub bool);

impl<'a> Decoder<'a> for Flag {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        term.decode::<bool>().map(Flag).map_err(|_| bad_arg(term, "expected true or false"))
    }
}

/// Text for kiln-core (kernel sources, entry points, op names): a binary holding UTF-8.
pub struct Text(pub String);

impl<'a> Decoder<'a> for Text {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let bin: rustler::Binary = term.decode().map_err(|_| bad_arg(term, "expected a string (a UTF-8 binary)"))?;
        match std::str::from_utf8(bin.as_slice()) {
            Ok(s) => Ok(Text(s.to_string())),
            Err(e) => Err(rustler::Error::Term(Box::new(KError(Error::InvalidArgument(format!(
                "the string is not valid UTF-8 (invalid byte at offset {} of {})",
                e.valid_up_to(),
                bin.len()
            )))))),
        }
    }
}

/// A dtype given as the atom `:f32 | :f16 | :i32 | :u32`.
pub struct Dt(pub DType);

impl<'a> Decoder<'a> for Dt {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let what = "expected a type atom :f32, :f16, :i32 or :u32";
        let name = term.atom_to_string().map_err(|_| bad_arg(term, what))?;
        DType::parse(&name).map(Dt).map_err(|_| bad_arg(term, what))
    }
}

pub fn dtype_atom(d: DType) -> Atom {
    match d {
        DType::F32 => atoms::f32(),
        DType::F16 => atoms::f16(),
        DType::I32 => atoms::i32(),
        DType::U32 => atoms::u32(),
    }
}

/// A scalar operand: a number, or `:infinity | :neg_infinity | :nan` (Nx's spelling). It
/// reaches kiln-core as the f64 it is, with no conversion here: core alone decides whether it
/// fits an integer tensor (`DType::check_scalar`: whole, finite, in range).
pub struct Scalar(pub f64);

impl<'a> Decoder<'a> for Scalar {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let what = "expected a number or :nan, :infinity, :neg_infinity";
        match term.get_type() {
            TermType::Float => term.decode::<f64>().map(Scalar).map_err(|_| bad_arg(term, what)),
            TermType::Integer => match int_of(term) {
                Some(v) => Ok(Scalar(v as f64)),
                // lib/kiln.ex hands bignums over as floats; one that gets here is out of range.
                None => Err(bad_arg(term, "an integer beyond 64 bits is out of range for every Kiln type")),
            },
            TermType::Atom => {
                let a: Atom = term.decode().map_err(|_| bad_arg(term, what))?;
                if a == atoms::infinity() {
                    Ok(Scalar(f64::INFINITY))
                } else if a == atoms::neg_infinity() {
                    Ok(Scalar(f64::NEG_INFINITY))
                } else if a == atoms::nan() {
                    Ok(Scalar(f64::NAN))
                } else {
                    Err(bad_arg(term, what))
                }
            }
            _ => Err(bad_arg(term, what)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors as resources. `Kiln.free/1` empties the slot at once; GC drops the resource.

pub struct TensorRes(Mutex<Option<Tensor>>);

#[rustler::resource_impl]
impl rustler::Resource for TensorRes {}

/// A tensor argument: the resource inside a `%Kiln.Tensor{}`.
pub struct TRef(pub ResourceArc<TensorRes>);

impl std::ops::Deref for TRef {
    type Target = TensorRes;
    fn deref(&self) -> &TensorRes {
        &self.0
    }
}

impl<'a> Decoder<'a> for TRef {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        term.decode::<ResourceArc<TensorRes>>().map(TRef).map_err(|_| bad_arg(term, "expected a Kiln tensor"))
    }
}

impl TensorRes {
    /// A handle to the tensor (cheap: shares the GPU buffer), or an error once freed.
    pub fn get(&self) -> kiln_core::Result<Tensor> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.clone()
            .ok_or_else(|| Error::InvalidArgument("the tensor was freed with Kiln.free/1 and cannot be used".into()))
    }
}

/// What a tensor is on the Elixir side: `{resource, shape, dtype}`.
pub struct Out(pub Tensor);

// Encoding only reads the shape and clones an Arc; nothing is left half-updated by a panic.
impl std::panic::RefUnwindSafe for Out {}

impl Encoder for Out {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let shape = self.0.shape().to_vec();
        let dt = dtype_atom(self.0.dtype());
        let res = ResourceArc::new(TensorRes(Mutex::new(Some(self.0.clone()))));
        (res, shape, dt).encode(env)
    }
}

pub fn tensor_reply(f: impl FnOnce() -> kiln_core::Result<Tensor>) -> Reply<Out> {
    guard(f).map(Out)
}

pub fn opt_get(t: &Opt<TRef>) -> kiln_core::Result<Option<Tensor>> {
    t.as_ref().map(|r| r.get()).transpose()
}

// ---------------------------------------------------------------------------------------------
// Build identity, upload, readback, free.

#[rustler::nif]
fn source_hash() -> &'static str {
    // The whole marker is one literal in the library, found by lib/kiln/native.ex before loading.
    concat!("kiln-nif-source-hash:", env!("KILN_NIF_SOURCE_HASH"))
}

/// A binary argument (tensor bytes, uniforms).
pub struct Bytes<'a>(pub rustler::Binary<'a>);

impl<'a> Decoder<'a> for Bytes<'a> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        term.decode::<rustler::Binary<'a>>().map(Bytes).map_err(|_| bad_arg(term, "expected a binary"))
    }
}

#[rustler::nif(schedule = "DirtyIo")]
fn from_binary(data: Bytes, dtype: Dt, shape: Shape) -> Reply<Out> {
    tensor_reply(|| Tensor::from_bytes(data.0.as_slice(), &shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn to_binary<'a>(env: Env<'a>, t: TRef) -> Reply<Term<'a>> {
    let bytes = guard(|| {
        let t = t.get()?;
        // (An allocation failure panics inside rustler and is caught by `guard`.)
        let mut bin = rustler::OwnedBinary::new(t.nbytes());
        t.read_into(bin.as_mut_slice())?;
        Ok(bin)
    })?;
    Ok(bytes.release(env).encode(env))
}

/// Drops this handle's tensor now; the GPU buffer goes back to the pool unless a view
/// (reshape) made from it is still alive.
#[rustler::nif(schedule = "DirtyIo")]
fn free(t: TRef) -> Reply<bool> {
    guard(|| {
        let taken = t.0 .0.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(taken.is_some())
    })
}

#[rustler::nif]
fn is_freed(t: TRef) -> bool {
    t.0 .0.lock().unwrap_or_else(|e| e.into_inner()).is_none()
}

rustler::init!("Elixir.Kiln.Native");
