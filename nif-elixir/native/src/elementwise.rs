//! Written by hand: the elementwise ops by name (one NIF per form, not per op: unary, binary with
//! broadcasting, the scalar forms) and clip's two bounds (where and cast: ops_gen.rs). The op names are parsed by kiln-core's own
//! `UnaryOp::parse` / `BinaryOp::parse`.

use crate::{opt_get, tensor_reply, Flag, Opt, Out, Reply, Scalar, TRef, Text};
use kiln_core::ops::{self, BinaryOp, UnaryOp};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn unary(env: Env<'_>, op: Text, x: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::unary(UnaryOp::parse(&op.0)?, &x.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn binary(env: Env<'_>, op: Text, a: TRef, b: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::binary(BinaryOp::parse(&op.0)?, &a.get()?, &b.get()?))
}

/// `a OP s`: the scalar reaches kiln-core untouched, which rejects NaN, fractions and values
/// out of range for an integer tensor (INVALID_ARGUMENT).
#[rustler::nif(schedule = "DirtyIo")]
fn binary_scalar(env: Env<'_>, op: Text, a: TRef, s: Scalar, scalar_first: Flag) -> Reply<Out> {
    tensor_reply(env, || ops::binary_scalar(BinaryOp::parse(&op.0)?, &a.get()?, s.0, scalar_first.0))
}

/// The Array API's `clip`: either bound may be nil (Elixir numbers are made tensors first).
#[rustler::nif(schedule = "DirtyIo")]
fn clip(env: Env<'_>, x: TRef, min: Opt<TRef>, max: Opt<TRef>) -> Reply<Out> {
    tensor_reply(env, || {
        let (lo, hi) = (opt_get(&min)?, opt_get(&max)?);
        ops::clip(&x.get()?, lo.as_ref(), hi.as_ref())
    })
}
