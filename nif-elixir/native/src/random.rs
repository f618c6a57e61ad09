//! Random: counter-based uniform and normal numbers.

use crate::{tensor_reply, Dt, Out, Reply, Scalar};
use kiln_core::ops;

#[rustler::nif(schedule = "DirtyIo")]
fn random_uniform(shape: Vec<usize>, dtype: Dt, seed: u64, low: Scalar, high: Scalar) -> Reply<Out> {
    tensor_reply(|| ops::random_uniform(&shape, dtype.0, seed, low.0, high.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn random_normal(shape: Vec<usize>, dtype: Dt, seed: u64, mean: Scalar, std: Scalar) -> Reply<Out> {
    tensor_reply(|| ops::random_normal(&shape, dtype.0, seed, mean.0, std.0))
}
