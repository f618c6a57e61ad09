//! Movement: reshape, permute, transpose, concat, slice, index_select, gather.

use crate::{tensor_reply, Axes, Int, List, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

fn ints(l: &Axes) -> Vec<isize> {
    l.0.iter().map(|i| i.0).collect()
}

#[rustler::nif(schedule = "DirtyIo")]
fn reshape(env: Env<'_>, x: TRef, shape: Axes) -> Reply<Out> {
    tensor_reply(env, || ops::reshape(&x.get()?, &ints(&shape)))
}

#[rustler::nif(schedule = "DirtyIo")]
fn permute(env: Env<'_>, x: TRef, axes: Axes) -> Reply<Out> {
    tensor_reply(env, || ops::permute(&x.get()?, &ints(&axes)))
}

#[rustler::nif(schedule = "DirtyIo")]
fn transpose(env: Env<'_>, x: TRef, a0: Int<isize>, a1: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || ops::transpose(&x.get()?, a0.0, a1.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn concat(env: Env<'_>, xs: List<TRef>, axis: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || {
        let ts = xs.0.iter().map(|t| t.get()).collect::<kiln_core::Result<Vec<_>>>()?;
        let refs: Vec<&kiln_core::Tensor> = ts.iter().collect();
        ops::concat(&refs, axis.0)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn slice(env: Env<'_>, x: TRef, axis: Int<isize>, start: Int<isize>, stop: Int<isize>, step: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || ops::slice(&x.get()?, axis.0, start.0, stop.0, step.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn index_select(env: Env<'_>, x: TRef, axis: Int<isize>, indices: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::index_select(&x.get()?, axis.0, &indices.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn gather(env: Env<'_>, x: TRef, axis: Int<isize>, index: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::gather(&x.get()?, axis.0, &index.get()?))
}
