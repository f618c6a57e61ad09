//! Elementwise: unary, binary (broadcasting), scalar forms, compare, where, cast. The op names
//! are parsed by kiln-core's own `UnaryOp::parse` / `BinaryOp::parse`.

use crate::{tensor_reply, Dt, Out, Reply, Scalar, TRef};
use kiln_core::ops::{self, BinaryOp, UnaryOp};

#[rustler::nif(schedule = "DirtyIo")]
fn unary(op: String, x: TRef) -> Reply<Out> {
    tensor_reply(|| ops::unary(UnaryOp::parse(&op)?, &x.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn binary(op: String, a: TRef, b: TRef) -> Reply<Out> {
    tensor_reply(|| ops::binary(BinaryOp::parse(&op)?, &a.get()?, &b.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn binary_scalar(op: String, a: TRef, s: Scalar, scalar_first: bool) -> Reply<Out> {
    tensor_reply(|| ops::binary_scalar(BinaryOp::parse(&op)?, &a.get()?, s.0, scalar_first))
}

#[rustler::nif(schedule = "DirtyIo")]
fn where_(cond: TRef, a: TRef, b: TRef) -> Reply<Out> {
    tensor_reply(|| ops::where_(&cond.get()?, &a.get()?, &b.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn cast(x: TRef, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::cast(&x.get()?, dtype.0))
}
