//! Reductions: sum mean max min (axes), var (ddof), argmax argmin (one axis or flattened).

use crate::{tensor_reply, Out, Reply, TRef};
use kiln_core::{ops, Error};

#[rustler::nif(schedule = "DirtyIo")]
fn reduce(op: String, x: TRef, axes: Option<Vec<isize>>, keepdims: bool) -> Reply<Out> {
    tensor_reply(|| {
        let x = x.get()?;
        let axes = axes.as_deref();
        match op.as_str() {
            "sum" => ops::sum(&x, axes, keepdims),
            "mean" => ops::mean(&x, axes, keepdims),
            "max" => ops::max(&x, axes, keepdims),
            "min" => ops::min(&x, axes, keepdims),
            _ => Err(Error::InvalidArgument(format!("unknown reduction {op:?}"))),
        }
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn var(x: TRef, axes: Option<Vec<isize>>, keepdims: bool, ddof: usize) -> Reply<Out> {
    tensor_reply(|| ops::var(&x.get()?, axes.as_deref(), keepdims, ddof))
}

#[rustler::nif(schedule = "DirtyIo")]
fn arg_reduce(op: String, x: TRef, axis: Option<isize>, keepdims: bool) -> Reply<Out> {
    tensor_reply(|| {
        let x = x.get()?;
        match op.as_str() {
            "argmax" => ops::argmax(&x, axis, keepdims),
            "argmin" => ops::argmin(&x, axis, keepdims),
            _ => Err(Error::InvalidArgument(format!("unknown arg-reduction {op:?}"))),
        }
    })
}
