//! Written by hand, not being ops of the table (zeros, ones, full, arange: ops_gen.rs): empty,
//! fill, copy. Fill values reach kiln-core as the f64 they are; core checks them against
//! the dtype (DType::check_scalar).

use crate::{guard, tensor_reply, Dt, Out, Reply, Scalar, Shape, TRef};
use kiln_core::{ops, Tensor};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn empty(env: Env<'_>, shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(env, || Tensor::empty(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn fill(env: Env<'_>, t: TRef, value: Scalar) -> Reply<()> {
    guard(env, || ops::fill(&t.get()?, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn copy(env: Env<'_>, t: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::copy(&t.get()?))
}
