//! What one pass of a kernel's code can cost, counted on its naga module before it runs: the
//! dispatch charge of a session's kernel multiplies it in (`Kernel::dispatch`).
//!
//! Counting an invocation as one operation per loop iteration left two multipliers free (issue
//! 28, "limits that each look bounded multiply"): the size of a loop body (a 64 KiB source
//! holds thousands of expressions per iteration) and the call tree (WGSL has no recursion, but
//! `f0` calling `f1` ten times, `f1` calling `f2` ten times, … is 10^depth calls with no loop
//! at all). The inlined size bounds both: inline every call (the call graph is acyclic), and an
//! invocation evaluates each expression and statement of the result at most once per loop
//! iteration plus once outside the loops, so at most `inlined_size × (1 + iterations)`.

use crate::{Error, Result};
use naga::{Block, Function, Handle, Module, Statement};
use std::collections::HashMap;

/// Expression and statement evaluations one counted operation stands for. The per-dispatch
/// bounds were measured with small loop kernels (the `spin` kernels of core/tests, at most 64
/// per pass: core/tests/compute_bounds.rs checks), so a kernel this size or smaller counts one operation per pass, as before, and a
/// bigger one counts in proportion.
pub(crate) const EVALUATIONS_PER_OP: u64 = 64;

/// Largest inlined size (expressions and statements, every call expanded) a kernel may have.
/// Drivers inline every call: lavapipe, given a 10-deep tree of helpers calling the next ten
/// times, spent the whole 20 s compile budget and went on in the background holding a core
/// (each such abandoned compile takes one of `kernel_limits`' four places). A flat source at
/// the 64 KiB limit is ~20,000; 2^18 leaves 13x that for helpers called several times.
pub(crate) const MAX_INLINED_SIZE: u64 = 1 << 18;

/// Operations one pass through the entry point's code counts (at least 1): its inlined size in
/// expressions and statements over [`EVALUATIONS_PER_OP`]. A kernel past [`MAX_INLINED_SIZE`]
/// is refused (SHADER) before the driver sees it.
pub(crate) fn ops_per_pass(module: &Module, entry_index: usize) -> Result<u64> {
    let mut memo = HashMap::new();
    let size = function_size(module, &module.entry_points[entry_index].function, &mut memo);
    if size > MAX_INLINED_SIZE {
        return Err(Error::Shader(format!(
            "kernel {:?} is {size} expressions and statements with every call inlined (as drivers compile it), \
             over the limit of {MAX_INLINED_SIZE}: call helpers fewer times, or loop instead",
            module.entry_points[entry_index].name
        )));
    }
    Ok(size.div_ceil(EVALUATIONS_PER_OP).max(1))
}

/// Expressions + statements of `f` with every called function's size added per call site.
fn function_size(module: &Module, f: &Function, memo: &mut HashMap<Handle<Function>, u64>) -> u64 {
    let mut calls = Vec::new();
    let statements = block_size(&f.body, &mut calls);
    let mut size = (f.expressions.len() as u64).saturating_add(statements);
    for callee in calls {
        let s = match memo.get(&callee) {
            Some(&s) => s,
            None => {
                // Validation rejected call cycles before this runs, so the recursion ends.
                let s = function_size(module, &module.functions[callee], memo);
                memo.insert(callee, s);
                s
            }
        };
        size = size.saturating_add(s);
    }
    size
}

/// Statements in `block` (nested blocks included); every call site is pushed on `calls`.
fn block_size(block: &Block, calls: &mut Vec<Handle<Function>>) -> u64 {
    let mut n = 0u64;
    for s in block.iter() {
        n = n.saturating_add(1);
        let nested = match s {
            Statement::Block(b) => block_size(b, calls),
            Statement::If { accept, reject, .. } => block_size(accept, calls).saturating_add(block_size(reject, calls)),
            Statement::Switch { cases, .. } => {
                cases.iter().fold(0u64, |acc, c| acc.saturating_add(block_size(&c.body, calls)))
            }
            Statement::Loop { body, continuing, .. } => {
                block_size(body, calls).saturating_add(block_size(continuing, calls))
            }
            Statement::Call { function, .. } => {
                calls.push(*function);
                0
            }
            _ => 0,
        };
        n = n.saturating_add(nested);
    }
    n
}
