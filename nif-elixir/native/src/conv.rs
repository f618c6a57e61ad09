//! Convolution and pooling (NCHW).

use crate::{opt_get, tensor_reply, Out, Reply, TRef};
use kiln_core::ops;

#[rustler::nif(schedule = "DirtyIo")]
fn conv2d(
    x: TRef,
    w: TRef,
    bias: Option<TRef>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
) -> Reply<Out> {
    tensor_reply(|| {
        let b = opt_get(&bias)?;
        ops::conv2d(
            &x.get()?,
            &w.get()?,
            b.as_ref(),
            [stride.0, stride.1],
            [padding.0, padding.1],
            [dilation.0, dilation.1],
            groups,
        )
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn max_pool2d(x: TRef, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize)) -> Reply<Out> {
    tensor_reply(|| ops::max_pool2d(&x.get()?, [kernel.0, kernel.1], [stride.0, stride.1], [padding.0, padding.1]))
}

#[rustler::nif(schedule = "DirtyIo")]
fn avg_pool2d(x: TRef, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize)) -> Reply<Out> {
    tensor_reply(|| ops::avg_pool2d(&x.get()?, [kernel.0, kernel.1], [stride.0, stride.1], [padding.0, padding.1]))
}
