//! Gives libkiln.so the soname "libkiln.so", so that a program (or Julia's ccall with the
//! library name "libkiln.so") finds an already-loaded copy by name.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkiln.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
