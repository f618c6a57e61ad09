//! Random: counter-based uniform and normal numbers.

use crate::{tensor_reply, Dt, Int, Out, Reply, Scalar, Shape};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn random_uniform(env: Env<'_>, shape: Shape, dtype: Dt, seed: Int<u64>, low: Scalar, high: Scalar) -> Reply<Out> {
    tensor_reply(env, || ops::random_uniform(&shape.0, dtype.0, seed.0, low.0, high.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn random_normal(env: Env<'_>, shape: Shape, dtype: Dt, seed: Int<u64>, mean: Scalar, std: Scalar) -> Reply<Out> {
    tensor_reply(env, || ops::random_normal(&shape.0, dtype.0, seed.0, mean.0, std.0))
}
