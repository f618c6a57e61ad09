//! Creation: zeros, ones, full, arange, empty, fill, copy. Fill values and arange bounds reach
//! kiln-core as the f64 they are; core checks them against the dtype (DType::check_scalar).

use crate::{guard, tensor_reply, Dt, Out, Reply, Scalar, Shape, TRef};
use kiln_core::{ops, Tensor};

#[rustler::nif(schedule = "DirtyIo")]
fn zeros(shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::zeros(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn ones(shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::ones(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn full(shape: Shape, dtype: Dt, value: Scalar) -> Reply<Out> {
    tensor_reply(|| ops::full(&shape.0, dtype.0, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn arange(start: Scalar, stop: Scalar, step: Scalar, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::arange(start.0, stop.0, step.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn empty(shape: Shape, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| Tensor::empty(&shape.0, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn fill(t: TRef, value: Scalar) -> Reply<()> {
    guard(|| ops::fill(&t.get()?, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn copy(t: TRef) -> Reply<Out> {
    tensor_reply(|| ops::copy(&t.get()?))
}
