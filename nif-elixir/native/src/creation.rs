//! Creation: zeros, ones, full, arange, empty, fill, copy. Fill values and arange bounds reach
//! kiln-core as the f64 they are; core checks them against the dtype (DType::check_scalar).

use crate::{guard, tensor_reply, Dt, Out, Reply, Scalar, Shape, TRef};
use kiln_core::{ops, Tensor};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn zeros(env: Env<'_>, shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(env, || ops::zeros(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn ones(env: Env<'_>, shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(env, || ops::ones(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn full(env: Env<'_>, shape: Shape, dtype: Dt, value: Scalar) -> Reply<Out> {
    tensor_reply(env, || ops::full(&shape.0, dtype.0, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn arange(env: Env<'_>, start: Scalar, stop: Scalar, step: Scalar, dtype: Dt) -> Reply<Out> {
    tensor_reply(env, || ops::arange(start.0, stop.0, step.0, dtype.0))
}

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
