//! Scans: cumulative_sum and cumulative_prod (one axis, an optional dtype, include_initial).

use crate::{tensor_reply, Dt, Flag, Int, Opt, Out, Reply, TRef, Text};
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
