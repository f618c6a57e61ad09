//! Convolution and pooling (NCHW).

use crate::{opt_get, tensor_reply, Int, Opt, Out, Pair, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

// The env (for the calling process's session) is the eighth argument.
#[allow(clippy::too_many_arguments)]
#[rustler::nif(schedule = "DirtyIo")]
fn conv2d(
    env: Env<'_>,
    x: TRef,
    w: TRef,
    bias: Opt<TRef>,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: Int<usize>,
) -> Reply<Out> {
    tensor_reply(env, || {
        let b = opt_get(&bias)?;
        ops::conv2d(&x.get()?, &w.get()?, b.as_ref(), stride.0, padding.0, dilation.0, groups.0)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn max_pool2d(env: Env<'_>, x: TRef, kernel: Pair, stride: Pair, padding: Pair) -> Reply<Out> {
    tensor_reply(env, || ops::max_pool2d(&x.get()?, kernel.0, stride.0, padding.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn avg_pool2d(env: Env<'_>, x: TRef, kernel: Pair, stride: Pair, padding: Pair) -> Reply<Out> {
    tensor_reply(env, || ops::avg_pool2d(&x.get()?, kernel.0, stride.0, padding.0))
}
