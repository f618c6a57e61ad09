//! Elixir: the op lists of nif-elixir/lib/kiln.ex and the codes of lib/kiln/error.ex.

use kiln_core::ops::{BinaryOp, UnaryOp};
use kiln_core::ErrorCode;
use std::fmt::Write as _;

/// Kernel functions that an op of the tables may be named after (Kiln defines its own, so the
/// module leaves Kernel's out), and those the hand-written reductions take (`max/2`, `min/2`).
pub(crate) const ELIXIR_KERNEL: &[(&str, usize)] =
    &[("abs", 1), ("ceil", 1), ("div", 2), ("floor", 1), ("rem", 2), ("round", 1), ("trunc", 1)];
pub(crate) const ELIXIR_KERNEL_HAND: &[(&str, usize)] = &[("max", 2), ("min", 2)];

pub(crate) fn elixir_ops() -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    for op in UnaryOp::ALL {
        names.push((op.binding_names()[1].strip_prefix('~').unwrap_or(op.binding_names()[1]), 1));
        names.push((op.name(), 1));
    }
    for op in BinaryOp::ALL {
        names.push((op.binding_names()[1].strip_prefix('~').unwrap_or(op.binding_names()[1]), 2));
        names.push((op.name(), 2));
    }
    let mut except: Vec<(&str, usize)> = ELIXIR_KERNEL.iter().copied().filter(|k| names.contains(k)).collect();
    except.extend_from_slice(ELIXIR_KERNEL_HAND);
    except.sort();
    let list = except.iter().map(|(n, a)| format!("{n}: {a}")).collect::<Vec<_>>().join(", ");
    let mut s = format!("  import Kernel, except: [{list}]\n\n");
    s += "  # {Elixir name (Nx's where Nx has the op), kiln-core name, dtypes: :float, :numeric,\n  # :bits (integers and {:u, 8}, the type kept) or :any (bool included, gives {:u, 8})}\n  @unary_ops [\n";
    let n = UnaryOp::ALL.len();
    for (i, op) in UnaryOp::ALL.into_iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let rule = if op.gives_bool() {
            "any"
        } else if op.is_bitwise() {
            "bits"
        } else if op.allows_int() {
            "numeric"
        } else {
            "float"
        };
        let _ = writeln!(s, "    {{:{}, \"{}\", :{rule}}}{sep}", op.binding_names()[1], op.name());
    }
    s +=
        "  ]\n\n  # {Elixir name (Nx's where Nx has the op), kiln-core name, gives {:u, 8} (bool)?}\n  @binary_ops [\n";
    let n = BinaryOp::ALL.len();
    for (i, op) in BinaryOp::ALL.into_iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let _ = writeln!(s, "    {{:{}, \"{}\", {}}}{sep}", op.binding_names()[1], op.name(), op.gives_bool());
    }
    // The blank line before the END marker is mix format's.
    s += "  ]\n\n";
    s
}

pub(crate) fn elixir_errors() -> String {
    let mut s = String::from("  @codes %{\n");
    let n = ErrorCode::ALL.len();
    for (i, c) in ErrorCode::ALL.iter().enumerate() {
        let sep = if i + 1 < n { "," } else { "" };
        let _ = writeln!(s, "    {}: {}{sep}", c.name().to_ascii_lowercase(), *c as u32);
    }
    s += "  }\n\n";
    s
}
