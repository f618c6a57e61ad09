//! The loop rewrite on kernels that always parse: the bytes choose a kernel's structure (helper
//! functions, every loop form nested in ifs, switches and each other, break, continue, `break
//! if`, barriers, atomics, workgroup memory) and the kernel goes through `sandbox_check` as in
//! wgsl_sandbox. That target mutates text, and most of what it tries never parses (94% of its
//! first corpus); here every input reaches validation and most reach the rewrite.
#![no_main]

use kiln_core::session::sandbox_check::sandbox_check;
use kiln_core::{Error, ShaderPolicy};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    out: String,
    /// Helpers declared so far (a function may call only earlier ones: WGSL has no recursion).
    helpers: usize,
    vars: usize,
}

impl Gen<'_, '_> {
    fn small(&mut self) -> Result<u32> {
        self.u.int_in_range(0..=5)
    }

    fn stmts(&mut self, depth: u32, in_loop: bool, in_continuing: bool) -> Result<()> {
        let n = self.u.int_in_range(0..=3)?;
        for _ in 0..n {
            self.stmt(depth, in_loop, in_continuing)?;
        }
        Ok(())
    }

    fn stmt(&mut self, depth: u32, in_loop: bool, in_continuing: bool) -> Result<()> {
        let kinds = if depth >= 4 { 4 } else { 11 };
        let k = self.small()?;
        match self.u.int_in_range(0..=kinds)? {
            0 => self.out += &format!("s += {k}u;\n"),
            1 if self.helpers > 0 => {
                let h = self.u.int_in_range(0..=self.helpers - 1)?;
                self.out += &format!("s = h{h}(s);\n");
            }
            2 if in_loop && !in_continuing => self.out += "if s > 3u { break; }\n",
            3 if in_loop && !in_continuing => self.out += "if (s & 1u) == 1u { continue; }\n",
            4 => self.out += "workgroupBarrier();\n",
            5 => {
                let v = self.vars;
                self.vars += 1;
                self.out += &format!("for (var i{v} = 0u; i{v} < {k}u; i{v}++) {{\n");
                self.stmts(depth + 1, true, false)?;
                self.out += "}\n";
            }
            6 => {
                self.out += &format!("while s < {}u {{\ns += 1u;\n", k + 3);
                self.stmts(depth + 1, true, false)?;
                self.out += "}\n";
            }
            7 => {
                self.out += &format!("loop {{\nif s > {}u {{ break; }}\ns += 1u;\n", k + 4);
                self.stmts(depth + 1, true, false)?;
                if self.u.arbitrary()? {
                    self.out += "continuing {\ns += 1u;\n";
                    self.stmts(depth + 1, true, true)?;
                    self.out += &format!("break if s > {}u;\n}}\n", k + 8);
                }
                self.out += "}\n";
            }
            8 => {
                self.out += &format!("if s % 2u == {}u {{\n", k % 2);
                self.stmts(depth + 1, in_loop, in_continuing)?;
                self.out += "} else {\n";
                self.stmts(depth + 1, in_loop, in_continuing)?;
                self.out += "}\n";
            }
            9 => {
                self.out += "switch s % 3u {\ncase 0u: {\n";
                self.stmts(depth + 1, in_loop, in_continuing)?;
                self.out += "}\ncase 1u, 2u: {\n";
                self.stmts(depth + 1, in_loop, in_continuing)?;
                self.out += "}\ndefault: {}\n}\n";
            }
            10 => self.out += "s += atomicAdd(&counter, 1u);\n",
            11 => self.out += &format!("w[s % 64u] = s;\ns += w[{k}u];\n"),
            _ => self.out += "s += o[s % 4u];\n",
        }
        Ok(())
    }

    fn kernel(&mut self) -> Result<String> {
        self.out += "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n";
        self.out += "@group(0) @binding(1) var<storage, read_write> counter: atomic<u32>;\n";
        self.out += "var<workgroup> w: array<u32, 64>;\n";
        for h in 0..self.u.int_in_range(0..=3)? {
            self.out += &format!("fn h{h}(n: u32) -> u32 {{\nvar s = n;\n");
            self.stmts(1, false, false)?;
            self.out += "return s;\n}\n";
            self.helpers += 1;
        }
        let wg = [1, 8, 64, 256][self.u.int_in_range(0..=3)?];
        self.out += &format!(
            "@compute @workgroup_size({wg}) fn main(@builtin(local_invocation_index) l: u32) {{\nvar s = 0u;\n"
        );
        self.stmts(0, false, false)?;
        self.out += "o[l] = s;\n}\n";
        Ok(std::mem::take(&mut self.out))
    }
}

fn strict() -> ShaderPolicy {
    ShaderPolicy {
        max_source_bytes: 0,
        max_workgroup_invocations: 64,
        max_bindings: 1,
        allow_f16: false,
        allow_atomics: false,
        allow_workgroup_memory: false,
        allow_subgroups: false,
    }
}

fn check(src: &str, policy: &ShaderPolicy) {
    match sandbox_check(src, "main", policy) {
        Err(Error::Internal(m)) => panic!("broken promise: {m}\n--- source ---\n{src}"),
        Err(Error::Shader(m)) if m.contains("policy:") => {
            let mut p = m.splitn(3, ':');
            let whole = |s: Option<&str>| s.and_then(|s| s.parse::<u32>().ok()).is_some_and(|n| n >= 1);
            assert!(whole(p.next()) && whole(p.next()), "policy error without line:column: {m}\n{src}");
        }
        Err(Error::Shader(m)) if m.contains("parse error") => panic!("the generator wrote bad WGSL: {m}\n{src}"),
        Err(Error::Shader(_)) | Ok(_) => {}
        Err(e) => panic!("unexpected error kind {:?}: {e}", e.code()),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(src) = (Gen { u: &mut u, out: String::new(), helpers: 0, vars: 0 }).kernel() else { return };
    check(&src, &ShaderPolicy::default());
    check(&src, &strict());
});
