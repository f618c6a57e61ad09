//! Creation: zeros, ones, full, arange, empty, fill, copy.

use crate::{guard, tensor_reply, Dt, Out, Reply, Scalar, TRef};
use kiln_core::{ops, Tensor};

#[rustler::nif(schedule = "DirtyIo")]
fn zeros(shape: Vec<usize>, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::zeros(&shape, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn ones(shape: Vec<usize>, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::ones(&shape, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn full(shape: Vec<usize>, dtype: Dt, value: Scalar) -> Reply<Out> {
    tensor_reply(|| ops::full(&shape, dtype.0, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn arange(start: f64, stop: f64, step: f64, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| ops::arange(start, stop, step, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn empty(shape: Vec<usize>, dtype: Dt) -> Reply<Out> {
    tensor_reply(|| Tensor::empty(&shape, dtype.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn fill(t: TRef, value: Scalar) -> Reply<()> {
    guard(|| ops::fill(&t.get()?, value.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn copy(t: TRef) -> Reply<Out> {
    tensor_reply(|| ops::copy(&t.get()?))
}
