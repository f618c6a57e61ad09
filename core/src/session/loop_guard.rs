//! Kernels that cannot hang the device: every loop of a session's kernel carries an iteration
//! budget. WGSL has no recursion (a call cycle is a validation error, and naga's validator
//! rejects it before this runs), so loops are the only construct that can run unboundedly; with
//! each loop bounded, and every loop charged to one per-invocation counter, an invocation runs at
//! most `budget` loop iterations in all, whatever the nesting or the helper functions.
//!
//! The rewrite works on the validated naga module and adds two globals:
//! - `kiln_loop_guard`, a storage buffer `array<u32, 2>` bound at the next free binding of group
//!   0: word 0 is the budget (the runtime writes the session's per dispatch), word 1 is set to 1
//!   by any invocation that ran out;
//! - `kiln_loop_left`, a private counter loaded from word 0 at the start of the entry point.
//!
//! and at the top of every loop body: `if (kiln_loop_left == 0u) { kiln_loop_guard[1] = 1u;
//! break; } kiln_loop_left -= 1u;`. A loop that ran out breaks; every enclosing loop then breaks
//! at its own first check, so an exhausted invocation finishes quickly. `continue` goes through
//! the check again (it jumps to the continuing block, then to the top of the body).

use crate::{Error, Result};
use naga::{
    AddressSpace, BinaryOperator, Block, Expression, Function, Handle, Literal, Module, Span, Statement, StorageAccess,
    Type, TypeInner,
};

/// A kernel's module with bounded loops, and the binding the budget buffer goes to.
pub(crate) struct Bounded {
    pub(crate) module: Module,
    pub(crate) guard_binding: u32,
}

fn has_loop(block: &Block) -> bool {
    block.iter().any(|s| match s {
        Statement::Loop { .. } => true,
        Statement::Block(b) => has_loop(b),
        Statement::If { accept, reject, .. } => has_loop(accept) || has_loop(reject),
        Statement::Switch { cases, .. } => cases.iter().any(|c| has_loop(&c.body)),
        _ => false,
    })
}

/// The rewritten module, or None when the kernel has no loop (nothing to bound: it ends).
pub(crate) fn bound_loops(module: &Module, entry: &str) -> Result<Option<Bounded>> {
    let Some(ep_index) = module.entry_points.iter().position(|e| e.name == entry) else {
        return Err(Error::Shader(format!("no entry point named {entry:?}")));
    };
    let any_loop = has_loop(&module.entry_points[ep_index].function.body)
        || module.functions.iter().any(|(_, f)| has_loop(&f.body));
    if !any_loop {
        return Ok(None);
    }
    let used = module.global_variables.iter().filter_map(|(_, v)| v.binding.as_ref()).filter(|b| b.group == 0);
    let guard_binding = match used.map(|b| b.binding).max() {
        None => 0,
        // naga accepts any u32 here: + 1 overflowed (a panic, or a wrap to 0 in release builds).
        Some(b) => b.checked_add(1).ok_or_else(|| {
            Error::Shader(format!("binding {b} of group 0 leaves no binding after it for the loop budget buffer"))
        })?,
    };
    let mut m = module.clone();
    let u32_ty = m.types.insert(Type { name: None, inner: TypeInner::Scalar(naga::Scalar::U32) }, Span::UNDEFINED);
    let arr_ty = m.types.insert(
        Type {
            name: None,
            inner: TypeInner::Array {
                base: u32_ty,
                size: naga::ArraySize::Constant(std::num::NonZeroU32::new(2).unwrap()),
                stride: 4,
            },
        },
        Span::UNDEFINED,
    );
    let guard = m.global_variables.append(
        naga::GlobalVariable {
            name: Some("kiln_loop_guard".into()),
            space: AddressSpace::Storage { access: StorageAccess::LOAD | StorageAccess::STORE },
            binding: Some(naga::ResourceBinding { group: 0, binding: guard_binding }),
            ty: arr_ty,
            init: None,
            memory_decorations: Default::default(),
        },
        Span::UNDEFINED,
    );
    let left = m.global_variables.append(
        naga::GlobalVariable {
            name: Some("kiln_loop_left".into()),
            space: AddressSpace::Private,
            binding: None,
            ty: u32_ty,
            init: None,
            memory_decorations: Default::default(),
        },
        Span::UNDEFINED,
    );
    let g = Globals { guard, left };
    for (_, f) in m.functions.iter_mut() {
        g.guard_function(f);
    }
    let ep = &mut m.entry_points[ep_index].function;
    g.guard_function(ep);
    // The counter starts at the budget in each invocation.
    let mut init = Block::new();
    let gp = ep.expressions.append(Expression::GlobalVariable(guard), Span::UNDEFINED);
    let word0 = emitted(ep, &mut init, Expression::AccessIndex { base: gp, index: 0 });
    let budget = emitted(ep, &mut init, Expression::Load { pointer: word0 });
    let lp = ep.expressions.append(Expression::GlobalVariable(left), Span::UNDEFINED);
    init.push(Statement::Store { pointer: lp, value: budget }, Span::UNDEFINED);
    init.append(&mut ep.body);
    ep.body = init;
    Ok(Some(Bounded { module: m, guard_binding }))
}

/// Appends `e` to `f`'s expressions and emits it at the end of `block`.
fn emitted(f: &mut Function, block: &mut Block, e: Expression) -> Handle<Expression> {
    let h = f.expressions.append(e, Span::UNDEFINED);
    block.push(Statement::Emit(naga::Range::new_from_bounds(h, h)), Span::UNDEFINED);
    h
}

struct Globals {
    guard: Handle<naga::GlobalVariable>,
    left: Handle<naga::GlobalVariable>,
}

impl Globals {
    fn guard_function(&self, f: &mut Function) {
        let mut body = std::mem::take(&mut f.body);
        self.guard_block(f, &mut body);
        f.body = body;
    }

    fn guard_block(&self, f: &mut Function, block: &mut Block) {
        for s in block.iter_mut() {
            match s {
                Statement::Loop { body, continuing, .. } => {
                    self.guard_block(f, body);
                    self.guard_block(f, continuing);
                    let mut check = self.check(f);
                    check.append(body);
                    *body = check;
                }
                Statement::Block(b) => self.guard_block(f, b),
                Statement::If { accept, reject, .. } => {
                    self.guard_block(f, accept);
                    self.guard_block(f, reject);
                }
                Statement::Switch { cases, .. } => {
                    for c in cases.iter_mut() {
                        self.guard_block(f, &mut c.body);
                    }
                }
                _ => {}
            }
        }
    }

    /// `if (left == 0u) { guard[1] = 1u; break; } left -= 1u;` with fresh expressions.
    fn check(&self, f: &mut Function) -> Block {
        let mut b = Block::new();
        let sp = Span::UNDEFINED;
        let lp = f.expressions.append(Expression::GlobalVariable(self.left), sp);
        let gp = f.expressions.append(Expression::GlobalVariable(self.guard), sp);
        let zero = f.expressions.append(Expression::Literal(Literal::U32(0)), sp);
        let one = f.expressions.append(Expression::Literal(Literal::U32(1)), sp);
        let cur = emitted(f, &mut b, Expression::Load { pointer: lp });
        let done = emitted(f, &mut b, Expression::Binary { op: BinaryOperator::Equal, left: cur, right: zero });
        let mut stop = Block::new();
        let flag = emitted(f, &mut stop, Expression::AccessIndex { base: gp, index: 1 });
        stop.push(Statement::Store { pointer: flag, value: one }, sp);
        stop.push(Statement::Break, sp);
        b.push(Statement::If { condition: done, accept: stop, reject: Block::new() }, sp);
        let next = emitted(f, &mut b, Expression::Binary { op: BinaryOperator::Subtract, left: cur, right: one });
        b.push(Statement::Store { pointer: lp, value: next }, sp);
        b
    }
}
