//! Reductions: sum mean max min all any (axes), var (ddof), argmax argmin (one axis or
//! flattened).

use crate::{axes, tensor_reply, Axes, Flag, Int, Opt, Out, Reply, TRef, Text};
use kiln_core::{ops, Error};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn reduce(env: Env<'_>, op: Text, x: TRef, axes_: Opt<Axes>, keepdims: Flag) -> Reply<Out> {
    tensor_reply(env, || {
        let x = x.get()?;
        let a = axes(&axes_);
        let a = a.as_deref();
        match op.0.as_str() {
            "sum" => ops::sum(&x, a, keepdims.0),
            "mean" => ops::mean(&x, a, keepdims.0),
            "max" => ops::max(&x, a, keepdims.0),
            "min" => ops::min(&x, a, keepdims.0),
            "all" => ops::all(&x, a, keepdims.0),
            "any" => ops::any(&x, a, keepdims.0),
            other => Err(Error::InvalidArgument(format!("unknown reduction {other:?}"))),
        }
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn var(env: Env<'_>, x: TRef, axes_: Opt<Axes>, keepdims: Flag, ddof: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || ops::var(&x.get()?, axes(&axes_).as_deref(), keepdims.0, ddof.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn arg_reduce(env: Env<'_>, op: Text, x: TRef, axis: Opt<Int<isize>>, keepdims: Flag) -> Reply<Out> {
    tensor_reply(env, || {
        let x = x.get()?;
        let axis = axis.0.map(|a| a.0);
        match op.0.as_str() {
            "argmax" => ops::argmax(&x, axis, keepdims.0),
            "argmin" => ops::argmin(&x, axis, keepdims.0),
            other => Err(Error::InvalidArgument(format!("unknown arg-reduction {other:?}"))),
        }
    })
}
