//! Scans (cumulative_sum and cumulative_prod: one axis, an optional dtype, include_initial) and
//! the statistics beside the reductions (prod with an optional dtype, std, diff).

use crate::{axes, opt_get, tensor_reply, Axes, Dt, Flag, Int, Opt, Out, Reply, TRef, Text};
use kiln_core::{ops, Error};

#[rustler::nif(schedule = "DirtyIo")]
fn scan(op: Text, x: TRef, axis: Opt<Int<isize>>, dtype: Opt<Dt>, include_initial: Flag) -> Reply<Out> {
    tensor_reply(|| {
        let x = x.get()?;
        let (axis, dtype) = (axis.0.map(|a| a.0), dtype.0.map(|d| d.0));
        match op.0.as_str() {
            "cumulative_sum" => ops::cumulative_sum(&x, axis, dtype, include_initial.0),
            "cumulative_prod" => ops::cumulative_prod(&x, axis, dtype, include_initial.0),
            other => Err(Error::InvalidArgument(format!("unknown scan {other:?}"))),
        }
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn prod(x: TRef, axes_: Opt<Axes>, keepdims: Flag, dtype: Opt<Dt>) -> Reply<Out> {
    tensor_reply(|| ops::prod(&x.get()?, axes(&axes_).as_deref(), keepdims.0, dtype.0.map(|d| d.0)))
}

#[rustler::nif(schedule = "DirtyIo")]
fn std(x: TRef, axes_: Opt<Axes>, keepdims: Flag, ddof: Int<usize>) -> Reply<Out> {
    tensor_reply(|| ops::std(&x.get()?, axes(&axes_).as_deref(), keepdims.0, ddof.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn diff(x: TRef, axis: Int<isize>, n: Int<usize>, prepend: Opt<TRef>, append: Opt<TRef>) -> Reply<Out> {
    tensor_reply(|| {
        let (p, a) = (opt_get(&prepend)?, opt_get(&append)?);
        ops::diff(&x.get()?, axis.0, n.0, p.as_ref(), a.as_ref())
    })
}
