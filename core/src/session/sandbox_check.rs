//! The checks a session's kernel goes through before the driver sees it, run without a device and
//! with the rewrite's promises checked: for the fuzz targets (core/fuzz/) and their regression
//! tests, which need the path but not the internals.
//!
//! It takes the steps of `CompileJob::run` (kernel/compile.rs) for a sandboxed kernel: the source limit,
//! naga's parse and validation, the entry point, the shader policy, the workgroup and private
//! memory limits, the loop rewrite (loop_guard.rs), validation of the rewritten module, and
//! naga's WGSL writer, whose text is what wgpu compiles; that text is parsed and validated again
//! here, as wgpu would. What the real path answers with an error is returned as that error
//! (`Error::Shader`); a broken promise of the rewrite is `Error::Internal`, which no input may
//! cause.

use super::kernel_front::{self, validation_text, validator, Front};
use super::{loop_guard, ShaderPolicy};
use crate::{kernel_limits, Error, Result};
use naga::{AddressSpace, Block, Expression, Function, Handle, Module, Statement};

/// The workgroup memory limit the check assumes (WebGPU's default, which every device offers).
pub const WORKGROUP_STORAGE_LIMIT: u32 = 16384;

/// What a kernel that passed every check became.
#[doc(hidden)]
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    /// Loops in the module, in every function (the entry point and helpers alike).
    pub loops: usize,
    /// The rewritten module as naga wrote it (what the driver gets); None without loops, when
    /// the kernel is compiled as written.
    pub bounded_wgsl: Option<String>,
    /// Where the loop budget buffer binds (group 0).
    pub guard_binding: Option<u32>,
}

/// Runs a sandboxed kernel's pre-driver path on `source` (entry point `entry`, under `policy`)
/// and checks what the loop rewrite promises: the rewritten module validates, every loop in it
/// starts with the budget check, its budget buffer takes a binding no other global has, and the
/// WGSL written from it parses and validates again with every loop still guarded.
///
/// Like a real compile it runs on a compile thread (`kernel_limits::run_compile`: the stack
/// sized for the largest accepted source, the compile-time budget), so a deep expression is
/// judged by the limits a tenant meets.
#[doc(hidden)]
pub fn sandbox_check(source: &str, entry: &str, policy: &ShaderPolicy) -> Result<SandboxReport> {
    kernel_limits::check_source_size(source)?;
    let (source, entry, policy) = (source.to_string(), entry.to_string(), policy.clone());
    kernel_limits::run_compile(&format!("kernel {entry:?}"), move || checked(&source, &entry, &policy))
}

fn checked(source: &str, entry: &str, policy: &ShaderPolicy) -> Result<SandboxReport> {
    // f16 allowed, as on a device that has it: the widest set of kernels a session may see.
    let Front { module, .. } = kernel_front::check(source, entry, true, Some(policy), WORKGROUP_STORAGE_LIMIT)?;
    let loops = count_loops(&module);
    let Some(bounded) = loop_guard::bound_loops(&module, entry)? else {
        if loops > 0 {
            return Err(broken(format!("{loops} loops, but the rewrite found none to bound")));
        }
        return Ok(SandboxReport { loops, ..Default::default() });
    };
    let rewritten = &bounded.module;
    let guard = guard_of(rewritten, bounded.guard_binding)?;
    check_guarded(rewritten, guard, loops, "the rewritten module")?;
    let rewritten_info = validator(true)
        .validate(rewritten)
        .map_err(|e| broken(format!("the rewritten module does not validate: {}", validation_text(&e))))?;
    let text = naga::back::wgsl::write_string(rewritten, &rewritten_info, naga::back::wgsl::WriterFlags::empty())
        .map_err(|e| broken(format!("naga cannot write the rewritten module: {e}")))?;
    let again = naga::front::wgsl::parse_str(&text)
        .map_err(|e| broken(format!("the written WGSL does not parse: {}\n{text}", e.emit_to_string(&text))))?;
    validator(true)
        .validate(&again)
        .map_err(|e| broken(format!("the written WGSL does not validate: {}\n{text}", validation_text(&e))))?;
    let guard_again = guard_of(&again, bounded.guard_binding)?;
    check_guarded(&again, guard_again, loops, "the written WGSL")?;
    Ok(SandboxReport { loops, bounded_wgsl: Some(text), guard_binding: Some(bounded.guard_binding) })
}

fn broken(text: String) -> Error {
    Error::Internal(format!("loop rewrite: {text}"))
}

fn functions(module: &Module) -> impl Iterator<Item = &Function> {
    module.functions.iter().map(|(_, f)| f).chain(module.entry_points.iter().map(|e| &e.function))
}

fn count_loops(module: &Module) -> usize {
    fn block(b: &Block) -> usize {
        b.iter()
            .map(|s| match s {
                Statement::Loop { body, continuing, .. } => 1 + block(body) + block(continuing),
                Statement::Block(b) => block(b),
                Statement::If { accept, reject, .. } => block(accept) + block(reject),
                Statement::Switch { cases, .. } => cases.iter().map(|c| block(&c.body)).sum(),
                _ => 0,
            })
            .sum()
    }
    functions(module).map(|f| block(&f.body)).sum()
}

/// The budget buffer: the one global at group 0, `binding`, which must be a storage buffer that
/// no other global shares.
fn guard_of(module: &Module, binding: u32) -> Result<Handle<naga::GlobalVariable>> {
    let at: Vec<_> = module
        .global_variables
        .iter()
        .filter(|(_, v)| v.binding.as_ref().is_some_and(|b| b.group == 0 && b.binding == binding))
        .collect();
    match at.as_slice() {
        [(h, v)] if matches!(v.space, AddressSpace::Storage { .. }) => Ok(*h),
        [] => Err(broken(format!("no global at the budget's binding {binding}"))),
        [_] => Err(broken(format!("the global at the budget's binding {binding} is not a storage buffer"))),
        _ => Err(broken(format!("{} globals share the budget's binding {binding}", at.len()))),
    }
}

/// Every loop of `module` (`loops` of them) starts with `if (left == 0u) { guard[1] = 1u; break; }`.
fn check_guarded(module: &Module, guard: Handle<naga::GlobalVariable>, loops: usize, what: &str) -> Result<()> {
    let mut seen = 0;
    for f in functions(module) {
        walk(module, f, &f.body, guard, &mut seen, what)?;
    }
    if seen != loops {
        return Err(broken(format!("{what} has {seen} loops where the kernel had {loops}")));
    }
    Ok(())
}

fn walk(
    module: &Module,
    f: &Function,
    block: &Block,
    guard: Handle<naga::GlobalVariable>,
    seen: &mut usize,
    what: &str,
) -> Result<()> {
    for s in block.iter() {
        match s {
            Statement::Loop { body, continuing, .. } => {
                *seen += 1;
                if !starts_with_check(module, f, body, guard) {
                    let name = f.name.as_deref().unwrap_or("?");
                    return Err(broken(format!("a loop of function {name:?} in {what} has no budget check")));
                }
                walk(module, f, body, guard, seen, what)?;
                walk(module, f, continuing, guard, seen, what)?;
            }
            Statement::Block(b) => walk(module, f, b, guard, seen, what)?,
            Statement::If { accept, reject, .. } => {
                walk(module, f, accept, guard, seen, what)?;
                walk(module, f, reject, guard, seen, what)?;
            }
            Statement::Switch { cases, .. } => {
                for c in cases {
                    walk(module, f, &c.body, guard, seen, what)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The global an expression is a pointer into (through indexing), if any.
fn root_global(f: &Function, mut e: Handle<Expression>) -> Option<Handle<naga::GlobalVariable>> {
    loop {
        match f.expressions[e] {
            Expression::GlobalVariable(g) => return Some(g),
            Expression::AccessIndex { base, .. } | Expression::Access { base, .. } => e = base,
            _ => return None,
        }
    }
}

/// Whether `body` begins (past `Emit`s) with the budget check: an `if` on a private counter
/// being 0 whose accept block sets a word of `guard` and ends in `break`.
fn starts_with_check(module: &Module, f: &Function, body: &Block, guard: Handle<naga::GlobalVariable>) -> bool {
    let Some(Statement::If { condition, accept, .. }) = body.iter().find(|s| !matches!(s, Statement::Emit(_))) else {
        return false;
    };
    let counter_is_zero = match f.expressions[*condition] {
        Expression::Binary { op: naga::BinaryOperator::Equal, left, right } => {
            let private_load = matches!(f.expressions[left], Expression::Load { pointer }
                if root_global(f, pointer).is_some_and(|g| module.global_variables[g].space == AddressSpace::Private));
            let zero = matches!(f.expressions[right], Expression::Literal(naga::Literal::U32(0)));
            private_load && zero
        }
        _ => false,
    };
    let sets_flag =
        accept.iter().any(|s| matches!(s, Statement::Store { pointer, .. } if root_global(f, *pointer) == Some(guard)));
    counter_is_zero && sets_flag && matches!(accept.last(), Some(Statement::Break))
}
