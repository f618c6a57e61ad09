//! Stamps the NIF with a hash of its own sources, so that the Elixir side can tell a stale
//! `priv/kiln_nif.so` from a current one (lib/kiln/native.ex computes the same hash).

use std::path::Path;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("native/src")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    names.sort();
    let mut h: u64 = 0xcbf29ce484222325;
    for n in &names {
        h = fnv1a(h, n.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, &std::fs::read(dir.join(n)).expect("source file"));
        h = fnv1a(h, &[0]);
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-env=KILN_NIF_SOURCE_HASH={h:016x}");
}
