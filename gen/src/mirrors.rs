//! Drift checks of the concepts that each binding restates in its own idiom rather than having
//! generated: today the session limits (kiln-core's `SessionLimits::fields`), restated as the C
//! mirror struct, Python's keyword arguments and stub, Julia's struct and keywords, the
//! browser's object keys and serve's configuration (the NIF's and Elixir's are generated, in
//! elixir.rs). A field missing from one of them fails `make gen` / `make gen-check`, naming the
//! file.

use crate::web::camel;
use anyhow::{bail, Context, Result};
use kiln_core::SessionLimits;
use std::path::Path;

/// Each restatement of the session limits: its file, whether it spells the fields in camelCase,
/// and the fields it leaves out on purpose.
const SESSION_LIMITS: &[(&str, bool, &[&str])] = &[
    ("ffi-c/src/session.rs", false, &[]),
    ("py/src/session.rs", false, &[]),
    ("py/python/kiln/__init__.pyi", false, &[]),
    ("julia/src/session.jl", false, &[]),
    // The page times nothing (no blocking waits to charge): no GPU-time budget in the browser.
    ("web/src/session.rs", true, &["max_gpu_time_ms"]),
    ("web/js/kiln.d.ts", true, &["max_gpu_time_ms"]),
    ("serve/src/config.rs", false, &[]),
];

/// Whether `text` has `word` with no identifier character on either side.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| !text[..i].ends_with(ident) && !text[i + word.len()..].starts_with(ident))
}

pub(crate) fn check(root: &Path) -> Result<()> {
    let mut missing = Vec::new();
    for (path, camel_case, left_out) in SESSION_LIMITS {
        let text = std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"))?;
        for f in SessionLimits::fields().map(|f| f.name).into_iter().filter(|f| !left_out.contains(f)) {
            let name = if *camel_case { camel(f) } else { f.to_string() };
            if !has_word(&text, &name) {
                missing.push(format!("{path}: session limit `{name}` (kiln-core's SessionLimits::{f}) is missing"));
            }
        }
    }
    if !missing.is_empty() {
        bail!("session limits restated out of step with kiln-core:\n  {}", missing.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_whole() {
        assert!(has_word("a max_bytes: 1", "max_bytes"));
        assert!(!has_word("a max_bytes_total: 1", "max_bytes"));
        assert!(!has_word("kiln_max_bytes", "max_bytes"));
    }

    /// The check fails, naming the file and the field, for a restatement that lacks one.
    #[test]
    fn a_missing_field_is_named() {
        let dir = std::env::temp_dir().join(format!("kiln-gen-mirrors-{}", std::process::id()));
        for (path, camel_case, _) in SESSION_LIMITS {
            let names: Vec<String> = SessionLimits::fields()
                .iter()
                .map(|f| f.name)
                .filter(|f| !(*path == "julia/src/session.jl" && *f == "max_kernels"))
                .map(|f| if *camel_case { camel(f) } else { f.to_string() })
                .collect();
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, names.join("\n")).unwrap();
        }
        let e = check(&dir).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("julia/src/session.jl: session limit `max_kernels`"), "{e}");
        assert_eq!(e.matches("is missing").count(), 1, "{e}");
    }
}
