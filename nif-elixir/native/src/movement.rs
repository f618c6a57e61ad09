//! Movement: reshape, permute, transpose, concat, slice, index_select, gather.

use crate::{tensor_reply, Out, Reply, TRef};
use kiln_core::ops;

#[rustler::nif(schedule = "DirtyIo")]
fn reshape(x: TRef, shape: Vec<isize>) -> Reply<Out> {
    tensor_reply(|| ops::reshape(&x.get()?, &shape))
}

#[rustler::nif(schedule = "DirtyIo")]
fn permute(x: TRef, axes: Vec<isize>) -> Reply<Out> {
    tensor_reply(|| ops::permute(&x.get()?, &axes))
}

#[rustler::nif(schedule = "DirtyIo")]
fn transpose(x: TRef, a0: isize, a1: isize) -> Reply<Out> {
    tensor_reply(|| ops::transpose(&x.get()?, a0, a1))
}

#[rustler::nif(schedule = "DirtyIo")]
fn concat(xs: Vec<TRef>, axis: isize) -> Reply<Out> {
    tensor_reply(|| {
        let ts = xs.iter().map(|t| t.get()).collect::<kiln_core::Result<Vec<_>>>()?;
        let refs: Vec<&kiln_core::Tensor> = ts.iter().collect();
        ops::concat(&refs, axis)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn slice(x: TRef, axis: isize, start: isize, stop: isize, step: isize) -> Reply<Out> {
    tensor_reply(|| ops::slice(&x.get()?, axis, start, stop, step))
}

#[rustler::nif(schedule = "DirtyIo")]
fn index_select(x: TRef, axis: isize, indices: TRef) -> Reply<Out> {
    tensor_reply(|| ops::index_select(&x.get()?, axis, &indices.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn gather(x: TRef, axis: isize, index: TRef) -> Reply<Out> {
    tensor_reply(|| ops::gather(&x.get()?, axis, &index.get()?))
}
