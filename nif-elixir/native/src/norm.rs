//! Normalisation: softmax, log_softmax, layer_norm, rms_norm, batch_norm.

use crate::{opt_get, tensor_reply, Int, Opt, Out, Reply, Scalar, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn softmax(env: Env<'_>, x: TRef, axis: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || ops::softmax(&x.get()?, axis.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn log_softmax(env: Env<'_>, x: TRef, axis: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || ops::log_softmax(&x.get()?, axis.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn layer_norm(env: Env<'_>, x: TRef, weight: Opt<TRef>, bias: Opt<TRef>, eps: Scalar) -> Reply<Out> {
    tensor_reply(env, || {
        let (w, b) = (opt_get(&weight)?, opt_get(&bias)?);
        ops::layer_norm(&x.get()?, w.as_ref(), b.as_ref(), eps.0 as f32)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn rms_norm(env: Env<'_>, x: TRef, weight: Opt<TRef>, eps: Scalar) -> Reply<Out> {
    tensor_reply(env, || {
        let w = opt_get(&weight)?;
        ops::rms_norm(&x.get()?, w.as_ref(), eps.0 as f32)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn batch_norm(
    env: Env<'_>,
    x: TRef,
    mean: TRef,
    var: TRef,
    weight: Opt<TRef>,
    bias: Opt<TRef>,
    eps: Scalar,
) -> Reply<Out> {
    tensor_reply(env, || {
        let (w, b) = (opt_get(&weight)?, opt_get(&bias)?);
        ops::batch_norm(&x.get()?, &mean.get()?, &var.get()?, w.as_ref(), b.as_ref(), eps.0 as f32)
    })
}
