//! `kiln devices` prints its table and nothing on stderr (issue 34: every process used to print
//! "error: XDG_RUNTIME_DIR is invalid or not set in the environment." twice, from a Wayland probe
//! Kiln never needs; core/src/instance.rs). Run as a server or CI job would: no XDG_RUNTIME_DIR,
//! no WAYLAND_DISPLAY, no DISPLAY.

use std::process::Command;

#[test]
fn kiln_devices_writes_nothing_to_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .arg("devices")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("* = chosen"), "no adapter table: {stdout}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "kiln devices wrote to stderr");
}
