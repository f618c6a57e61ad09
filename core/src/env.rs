//! Kiln's `KILN_*` settings from the environment: one parser for all of them, so every variable
//! treats a value that does not parse the same way (the default is kept).

/// The value of `name` parsed as `T` (surrounding spaces ignored), or `default`.
pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    crate::platform::env_var(name).and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}
