//! The built-in kernels' WGSL templates: `{{NAME}}` placeholders filled, a left-over one caught.

/// Fills `{{NAME}}` placeholders of a WGSL template. A placeholder left unfilled is a bug in a
/// built-in op: checked always (tests build in release, where a debug assertion never runs),
/// and the panic becomes a PANIC error at the binding's boundary.
pub(crate) fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{{{{k}}}}}"), v);
    }
    if let Some(name) = unfilled_placeholder(&s) {
        panic!("built-in kernel template: placeholder {{{{{name}}}}} left unfilled");
    }
    s
}

/// The first `{{NAME}}` (upper-case letters, digits, `_`) in `s`.
fn unfilled_placeholder(s: &str) -> Option<&str> {
    let mut rest = s;
    while let Some(i) = rest.find("{{") {
        let after = &rest[i + 2..];
        let len =
            after.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(after.len());
        if len > 0 && after[len..].starts_with("}}") {
            return Some(&after[..len]);
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod render_tests {
    use super::{render, unfilled_placeholder};

    #[test]
    fn placeholders_are_filled_or_reported() {
        assert_eq!(render("a {{X}} b {{Y_2}}", &[("X", "1"), ("Y_2", "2")]), "a 1 b 2");
        assert_eq!(unfilled_placeholder("fn f() {{ }} {{ NOT }}"), None);
        assert_eq!(unfilled_placeholder("x {{MISSING}} y"), Some("MISSING"));
        assert!(std::panic::catch_unwind(|| render("{{A}} {{B}}", &[("A", "1")])).is_err());
    }
}
