//! The Elixir NIF of Kiln (module `Kiln.Native`), Explorer style: no op logic here, only term
//! conversion, resource handling and error mapping. Every function that may wait on the GPU (or
//! compile a pipeline) runs on a dirty scheduler, and every body runs under `catch_unwind`, so a
//! panic becomes `{:error, {:panic, 12, msg}}` instead of taking the VM down.
//!
//! Replies: `{:ok, value} | {:error, {code_atom, code_number, message}}`; a tensor travels as
//! `{resource, shape_list, dtype_atom}` and `lib/kiln.ex` wraps it in `%Kiln.Tensor{}`.

use kiln_core::{DType, Error, ErrorCode, Tensor};
use rustler::{Atom, Decoder, Encoder, Env, NifResult, ResourceArc, Term};
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

/// A dtype given as the atom `:f32 | :f16 | :i32 | :u32`.
pub struct Dt(pub DType);

impl<'a> Decoder<'a> for Dt {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let name = term.atom_to_string()?;
        DType::parse(&name).map(Dt).map_err(|_| rustler::Error::BadArg)
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

/// A scalar operand: a number, or `:infinity | :neg_infinity | :nan` (Nx's spelling).
pub struct Scalar(pub f64);

impl<'a> Decoder<'a> for Scalar {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        if let Ok(v) = term.decode::<f64>() {
            return Ok(Scalar(v));
        }
        let a: Atom = term.decode()?;
        if a == atoms::infinity() {
            Ok(Scalar(f64::INFINITY))
        } else if a == atoms::neg_infinity() {
            Ok(Scalar(f64::NEG_INFINITY))
        } else if a == atoms::nan() {
            Ok(Scalar(f64::NAN))
        } else {
            Err(rustler::Error::BadArg)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors as resources. `Kiln.free/1` empties the slot at once; GC drops the resource.

pub struct TensorRes(Mutex<Option<Tensor>>);

#[rustler::resource_impl]
impl rustler::Resource for TensorRes {}

pub type TRef = ResourceArc<TensorRes>;

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

pub fn opt_get(t: &Option<TRef>) -> kiln_core::Result<Option<Tensor>> {
    t.as_ref().map(|r| r.get()).transpose()
}

// ---------------------------------------------------------------------------------------------
// Build identity, upload, readback, free.

#[rustler::nif]
fn source_hash() -> &'static str {
    // The whole marker is one literal in the library, found by lib/kiln/native.ex before loading.
    concat!("kiln-nif-source-hash:", env!("KILN_NIF_SOURCE_HASH"))
}

#[rustler::nif(schedule = "DirtyIo")]
fn from_binary(data: rustler::Binary, dtype: Dt, shape: Vec<usize>) -> Reply<Out> {
    tensor_reply(|| Tensor::from_bytes(data.as_slice(), &shape, dtype.0))
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
        let taken = t.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(taken.is_some())
    })
}

#[rustler::nif]
fn is_freed(t: TRef) -> bool {
    t.0.lock().unwrap_or_else(|e| e.into_inner()).is_none()
}

rustler::init!("Elixir.Kiln.Native");
