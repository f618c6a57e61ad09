//! Stamps the NIF with a hash of the sources it is built from, so that the Elixir side can tell
//! a stale `priv/kiln_nif.so` from a current one (lib/kiln/native.ex computes the same hash over
//! the same files): the NIF's own sources and kiln-core's (core/src/**/*.rs, shaders/*.wgsl), so a
//! change to core also makes the old library stale.

use std::path::{Path, PathBuf};

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Files under `dir` (recursively when `deep`) whose name ends with `ext`.
fn files(dir: &Path, ext: &str, deep: bool, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let p = e.path();
        if p.is_dir() {
            if deep {
                files(&p, ext, deep, out);
            }
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().expect("repository root");
    let mut all = Vec::new();
    files(&root.join("nif-elixir/native/src"), ".rs", false, &mut all);
    files(&root.join("core/src"), ".rs", true, &mut all);
    files(&root.join("shaders"), ".wgsl", false, &mut all);
    // Paths relative to the repository root, in byte order (as native.ex sorts them).
    let mut names: Vec<(String, PathBuf)> = all
        .into_iter()
        .map(|p| (p.strip_prefix(&root).expect("under the root").to_string_lossy().into_owned(), p))
        .collect();
    names.sort();
    let mut h: u64 = 0xcbf29ce484222325;
    for (n, p) in &names {
        h = fnv1a(h, n.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, &std::fs::read(p).expect("source file"));
        h = fnv1a(h, &[0]);
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../../core/src");
    println!("cargo:rerun-if-changed=../../shaders");
    println!("cargo:rustc-env=KILN_NIF_SOURCE_HASH={h:016x}");
}
