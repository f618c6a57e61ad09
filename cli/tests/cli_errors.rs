//! The `kiln` binary as a user meets it (issue 28): hostile model files fail with a non-zero exit
//! and one clear message, bad flags are refused by name, the help lists the user's commands, and
//! `kiln run` says when its dispatch cannot cover an output. Synthetic files only: no real model.

#[path = "../../models/tests/fixtures/mod.rs"]
mod fixtures;

use fixtures::*;
use std::process::{Command, Output};

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).output().expect("kiln runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn fails_with(o: &Output, words: &[&str]) -> String {
    let e = stderr(o);
    assert!(!o.status.success(), "exit code 0; stderr: {e}");
    for w in words {
        assert!(e.contains(w), "stderr should contain {w:?}: {e}");
    }
    e
}

#[test]
fn a_missing_model_directory_is_said_once() {
    let o = kiln(&["embed", "--model", "/nonexistent/kiln-model", "hello"]);
    let e = fails_with(&o, &["model directory not found"]);
    assert_eq!(e.matches("model directory not found").count(), 1, "{e}");
    assert_eq!(e.matches("/nonexistent/kiln-model").count(), 1, "{e}");
}

#[test]
fn a_directory_given_to_generate_is_named_as_one() {
    let dir = scratch("cli-dir");
    let o = kiln(&["generate", "--model", dir.to_str().unwrap(), "--prompt", "hi"]);
    let e = fails_with(&o, &["a directory", "expected a .gguf file"]);
    assert_eq!(e.matches(dir.to_str().unwrap()).count(), 1, "{e}");
    assert!(!e.contains("os error 19") && !e.contains("No such device"), "{e}");
}

#[test]
fn negative_sampling_values_are_refused_by_name() {
    for (flag, v, words) in [
        ("--temperature", "-1", "--temperature must be >= 0"),
        ("--temperature", "-0.5", "--temperature must be >= 0"),
        ("--top-p", "-1", "--top-p must be in (0, 1]"),
        ("--repetition-penalty", "-2", "--repetition-penalty must be positive"),
    ] {
        let o = kiln(&["generate", "--model", "x.gguf", "--prompt", "hi", flag, v]);
        let e = fails_with(&o, &[words]);
        assert!(!e.contains("unexpected argument"), "{flag} {v}: {e}");
    }
}

#[test]
fn hostile_embedding_models_exit_non_zero() {
    // Before: layer_norm_eps = -1 printed NaN embeddings and exited 0.
    let dir = scratch("cli-eps");
    Bert { layer_norm_eps: "-1".into(), ..Bert::good() }.write(&dir);
    let o = kiln(&["embed", "--model", dir.to_str().unwrap(), "hello"]);
    fails_with(&o, &["config.json", "layer_norm_eps"]);
    assert!(o.stdout.is_empty(), "printed embeddings: {}", String::from_utf8_lossy(&o.stdout));
    let dir = scratch("cli-vocab");
    Bert { vocab_size: 4, ..Bert::good() }.write(&dir);
    let o = kiln(&["embed", "--model", dir.to_str().unwrap(), "hello"]);
    fails_with(&o, &["tokenizer.json", "vocab_size"]);
    let dir = scratch("cli-empty");
    Bert { vocab: "{}".into(), ..Bert::good() }.write(&dir);
    fails_with(&kiln(&["embed", "--model", dir.to_str().unwrap(), "hello"]), &["tokenizer.json", "empty"]);
}

#[test]
fn an_aliased_gguf_exits_non_zero() {
    let dir = scratch("cli-gguf");
    let path = dir.join("aliased.gguf");
    std::fs::write(&path, aliased_gguf(1000)).unwrap();
    let o = kiln(&["generate", "--model", path.to_str().unwrap(), "--prompt", "hi"]);
    fails_with(&o, &["aliased.gguf", "overlap"]);
}

#[test]
fn help_lists_user_commands_and_groups_developer_ones() {
    let o = kiln(&["--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let (commands, dev) = help.split_once("Developer commands").expect("a developer heading");
    for user in ["devices", "demo", "run", "bench", "embed", "generate", "serve"] {
        assert!(commands.contains(&format!("  {user} ")), "{user} missing from the commands: {help}");
    }
    for d in ["conformance", "fuzz", "serve-load"] {
        assert!(!commands.contains(&format!("\n  {d} ")), "{d} among the user's commands: {help}");
        assert!(dev.contains(&format!("  {d} ")), "{d} missing under the developer heading: {help}");
        // Hidden, still runnable (the Makefile calls them).
        assert!(kiln(&[d, "--help"]).status.success(), "kiln {d} --help");
    }
    // The generator of the bindings' surfaces is a developer tool of its own (gen/, `kiln-gen`),
    // not shipped in `kiln`.
    assert!(!help.contains("  gen "), "gen in kiln's help: {help}");
    assert!(!kiln(&["gen", "--help"]).status.success(), "kiln gen still runs");
}

#[test]
fn run_warns_when_the_dispatch_cannot_cover_an_output() {
    // Issue 28: one workgroup of 64 over 1000 elements left 936 zeros without a word.
    let dir = scratch("cli-run");
    let k = dir.join("k.wgsl");
    std::fs::write(
        &k,
        "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
         if (g.x < arrayLength(&out)) { out[g.x] = 1.0; } }\n",
    )
    .unwrap();
    let out = dir.join("out.npy");
    let (k, out) = (k.to_str().unwrap(), out.to_str().unwrap());
    let run = |wg: &str| {
        kiln(&["run", k, "--output", out, "--output-shape", "1000", "--output-dtype", "f32", "--workgroups", wg])
    };
    let o = run("1");
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("warning") && e.contains("1000 elements") && e.contains("64 invocations"), "{e}");
    // What the warning says is what happened: 936 of the 1000 stayed 0.
    let bytes = std::fs::read(out).unwrap();
    let vals: Vec<f32> =
        bytes[bytes.len() - 4000..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(vals.iter().filter(|&&v| v == 0.0).count(), 936);
    let o = run("16");
    assert!(o.status.success() && !stderr(&o).contains("warning"), "{}", stderr(&o));
}
