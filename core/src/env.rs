//! Kiln's `KILN_*` settings from the environment: one parser for all of them, so every variable
//! treats a value that does not parse the same way (the default is kept).

/// The value of `name` parsed as `T` (surrounding spaces ignored), or `default`.
pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    crate::platform::env_var(name).and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}

/// `name` as `N` comma-separated u32s (the tiling knobs), or None when unset or malformed.
pub(crate) fn env_u32s<const N: usize>(name: &str) -> Option<[u32; N]> {
    let s = crate::platform::env_var(name)?;
    let v: Vec<u32> = s.split(',').map(|x| x.trim().parse().ok()).collect::<Option<_>>()?;
    v.try_into().ok()
}
