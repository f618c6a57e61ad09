//! The module's stack: 8 MiB instead of rustc's 1 MiB default, for naga's recursion over a
//! kernel's expressions (kiln-core's platform/web.rs bounds their depth to fit it).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg=-zstack-size=8388608");
    }
}
