// The browser runner of the conformance suite (tests/conformance/FORMAT.md): every case of
// manifest.json through kiln.js in this page, never through another language. Resolves to
// {"language": "javascript", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]};
// scripts/web-test.py writes it to results/javascript.json for compare.py. Written by hand
// where kiln.js's form is JavaScript's own; the generated functions' calls are the marked region's.
import * as kiln from "../js/kiln.js";

const BASE = "/tests/conformance/out/";
const ARRAYS = { f32: Float32Array, f16: Uint16Array, i32: Int32Array, u32: Uint32Array, bool: Uint8Array };

async function fetchBytes(file) {
  const r = await fetch(BASE + file);
  if (!r.ok) throw new Error(`${file}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

const upload = async (spec) => kiln.fromBytes(await fetchBytes(spec.file), spec.shape, spec.dtype);

/** The fields of each unique_* result, in the order of the standard's tuple (the case's `output`). */
const UNIQUE_FIELDS = {
  unique_all: ["values", "indices", "inverse_indices", "counts"],
  unique_counts: ["values", "counts"],
  unique_inverse: ["values", "inverse_indices"],
};

/** Element `k` of a list of tensors; the others are freed. */
function pick(ts, k) {
  ts.forEach((t, i) => i !== k && t.free());
  return ts[k];
}

/** Calls op `op` as the package spells it (the generated table's JavaScript names). */
async function call(op, f, p, ins) {
  const x = ins.length ? ins[0][1] : undefined;
  const get = (name) => ins.find(([n]) => n === name)?.[1];
  switch (op) {
    // BEGIN GENERATED (kiln gen): the ops with a generated kiln.js function (their rows' arguments)
    case "zeros":
      return f(p.shape, p.dtype);
    case "ones":
      return f(p.shape, p.dtype);
    case "full":
      return f(p.shape, p.value, p.dtype);
    case "arange":
      return f(p.start, p.stop, p.step, p.dtype);
    case "random_uniform":
      return f(p.shape, p.seed, p.low, p.high, p.dtype);
    case "random_normal":
      return f(p.shape, p.seed, p.mean, p.std, p.dtype);
    case "where":
      return f(get("cond"), get("a"), get("b"));
    case "cast":
      return f(get("x"), p.dtype);
    case "matmul":
      return f(get("a"), get("b"));
    case "sum":
      return f(get("x"), p.axes, p.keepdims);
    case "mean":
      return f(get("x"), p.axes, p.keepdims);
    case "max":
      return f(get("x"), p.axes, p.keepdims);
    case "min":
      return f(get("x"), p.axes, p.keepdims);
    case "all":
      return f(get("x"), p.axes, p.keepdims);
    case "any":
      return f(get("x"), p.axes, p.keepdims);
    case "var":
      return f(get("x"), p.axes, p.keepdims, p.ddof);
    case "argmax":
      return f(get("x"), p.axis, p.keepdims);
    case "argmin":
      return f(get("x"), p.axis, p.keepdims);
    case "softmax":
      return f(get("x"), p.axis);
    case "log_softmax":
      return f(get("x"), p.axis);
    case "layer_norm":
      return f(get("x"), get("weight"), get("bias"), p.eps);
    case "rms_norm":
      return f(get("x"), get("weight"), p.eps);
    case "batch_norm":
      return f(get("x"), get("mean"), get("var"), get("weight"), get("bias"), p.eps);
    case "conv2d":
      return f(get("x"), get("w"), get("bias"), { stride: p.stride, padding: p.padding, dilation: p.dilation, groups: p.groups });
    case "max_pool2d":
      return f(get("x"), p.kernel, { stride: p.stride, padding: p.padding });
    case "avg_pool2d":
      return f(get("x"), p.kernel, { stride: p.stride, padding: p.padding });
    case "reshape":
      return f(get("x"), p.shape);
    case "permute":
      return f(get("x"), p.axes);
    case "transpose":
      return f(get("x"), p.axis0, p.axis1);
    case "concat":
      return f(ins.map(([, t]) => t), p.axis);
    case "slice":
      return f(get("x"), p.axis, p.start, p.stop, p.step);
    case "index_select":
      return f(get("x"), p.axis, get("indices"));
    case "gather":
      return f(get("x"), p.axis, get("index"));
    case "embedding":
      return f(get("weight"), get("ids"));
    case "rope":
      return f(get("x"), p.pos_offset, p.base);
    case "attention":
      return f(get("q"), get("k"), get("v"), { causal: p.causal, scale: p.scale });
    case "quantize":
      return f(get("x"), p.format);
    case "dequantize":
      return f(get("w"), p.format, p.rows, p.cols);
    case "quant_matmul":
      return f(get("x"), get("w"), p.format, p.n);
    case "quant_embedding":
      return f(get("w"), p.format, p.d, get("ids"));
    case "sort":
      return f(get("x"), { axis: p.axis, descending: p.descending });
    case "argsort":
      return f(get("x"), { axis: p.axis, descending: p.descending });
    case "topk": {
      const r = f(get("x"), p.k, p.axis, p.largest);
      return pick([r.values, r.indices], p.output);
    }
    case "count_nonzero":
      return f(get("x"), p.axes, p.keepdims);
    case "isin":
      return f(get("x1"), get("x2"), { invert: p.invert });
    case "cumulative_sum":
      return f(get("x"), { axis: p.axis, dtype: p.dtype, includeInitial: p.include_initial });
    case "cumulative_prod":
      return f(get("x"), { axis: p.axis, dtype: p.dtype, includeInitial: p.include_initial });
    case "prod":
      return f(get("x"), p.axes, p.keepdims, p.dtype);
    case "std":
      return f(get("x"), p.axes, p.keepdims, p.ddof);
    case "vecdot":
      return f(get("a"), get("b"), p.axis);
    // END GENERATED (kiln gen)
    // The ops kiln.js writes by hand (another JavaScript form than the row's, or a promise).
    case "clip":
      return "min" in p ? f(x, p.min, p.max) : f(x, get("min"), get("max"));
    case "quant_from_bytes":
      return f((await x.toBytes()).subarray(0, p.nbytes), p.format, p.rows, p.cols);
    case "diff":
      return f(x, { axis: p.axis, n: p.n, prepend: get("prepend"), append: get("append") });
    case "tensordot":
      return f(get("a"), get("b"), p.n >= 0 ? p.n : [p.axes1, p.axes2]);
    case "searchsorted":
      return f(get("x1"), get("x2"), { side: p.right ? "right" : "left" });
    case "unique_values":
      return f(x);
    // The ops giving several tensors are checked on the element `output` (the others are freed).
    case "nonzero":
      return pick(await f(x), p.output);
    case "unique_all":
    case "unique_counts":
    case "unique_inverse": {
      const r = await f(x);
      return pick(UNIQUE_FIELDS[op].map((k) => r[k]), p.output);
    }
    case "kernel": {
      const src = new TextDecoder().decode(await fetchBytes(p.source));
      const k = await kiln.Kernel.compile(src, p.entry);
      const uni = p.uniforms === null ? undefined : Uint8Array.from(p.uniforms.match(/../g) ?? [], (h) => parseInt(h, 16));
      k.dispatch(ins.map(([, t]) => t), p.workgroups, uni);
      k.free();
      return ins[p.output][1];
    }
  }
  if ("scalar" in p) return p.scalar_first ? f(Number(p.scalar), x) : f(x, Number(p.scalar));
  if (ins.length === 2) return f(get("a"), get("b"));
  if (ins.length === 1) return f(x);
  throw new Error(`the JavaScript runner has no calling convention for op ${op}`);
}

function f16ToNumber(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function numbers(bytes, dtype) {
  const a = new ARRAYS[dtype](bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  return dtype === "f16" ? Array.from(a, f16ToNumber) : Array.from(a);
}

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");

async function check(c, y) {
  const got = await y.toBytes();
  const digest = hex(await crypto.subtle.digest("SHA-256", got));
  const want = await fetchBytes(c.expected.file);
  const shape = Array.from(y.shape);
  if (y.dtype !== c.expected.dtype || shape.join() !== c.expected.shape.join()) {
    return ["fail", digest, `output ${y.dtype} [${shape}], expected ${c.expected.dtype} [${c.expected.shape}]`];
  }
  const g = numbers(got, y.dtype);
  const w = numbers(want, c.expected.dtype);
  if (g.length !== w.length) return ["fail", digest, `${g.length} elements, expected ${w.length}`];
  let bad = 0;
  let first = -1;
  for (let i = 0; i < w.length; i++) {
    let ok = (Number.isNaN(g[i]) && Number.isNaN(w[i])) || g[i] === w[i] || Math.abs(g[i] - w[i]) <= c.atol + c.rtol * Math.abs(w[i]);
    // A zero matches only a zero of the same sign (-0 and +0 are different results).
    if (g[i] === 0 && w[i] === 0 && Object.is(g[i], -0) !== Object.is(w[i], -0)) ok = false;
    if (!ok) {
      bad++;
      if (first < 0) first = i;
    }
  }
  if (!bad) return ["pass", digest, ""];
  return ["fail", digest, `${bad} of ${w.length} elements outside atol ${c.atol} rtol ${c.rtol}; first: element ${first}: got ${g[first]}, expected ${w[first]}`];
}

/**
 * Whether the adapter flushes a subnormal product to zero (WGSL allows it; SwiftShader does):
 * a raw multiply in a custom kernel, not kiln's mul (which reads subnormals from the bits).
 * compare.py reports a case that differs from the native languages on such an adapter, and
 * has subnormals in its data, as "adapter flushes subnormals" instead of a failure.
 */
async function flushesSubnormals() {
  const k = await kiln.Kernel.compile(
    "@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n" +
      "@compute @workgroup_size(1) fn main() { v[0] = v[0] * v[1]; }",
  );
  const t = kiln.tensor(new Float32Array([1e-40, 1.0]), [2]);
  k.dispatch([t], 1);
  const got = (await t.toArray())[0];
  t.free();
  k.free();
  return got === 0;
}

/**
 * Whether the adapter's shader compiler merges the constants +0.0 and -0.0 of one module into
 * one (Chromium's SwiftShader path does: a module storing `f32(0)` and `bitcast<f32>(0x80000000u)`
 * stores the same zero twice). kiln's float scans start from a -0 identity and write a +0
 * initial value in the same kernel, so on such an adapter `include_initial` gets a -0 there.
 */
async function mergesSignedZeros() {
  const k = await kiln.Kernel.compile(
    "@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n" +
      "@compute @workgroup_size(1) fn main() { v[0] = f32(0); v[1] = bitcast<f32>(0x80000000u); }",
  );
  const t = kiln.tensor(new Float32Array([1, 1]), [2]);
  k.dispatch([t], 1);
  const [pos, neg] = await t.toArray();
  t.free();
  k.free();
  return Object.is(pos, -0) || Object.is(neg, 0);
}

/**
 * Ops of the op table that kiln.js does not expose yet, with the reason: each case of them is
 * reported unsupported (not missing) so the rest of the suite still gates the browser. None now.
 */
const PENDING_IN_BROWSER = {};

/**
 * Why the adapter cannot run a case, or null: f16 without shader-f16 (SwiftShader). (Where the
 * compiler merges signed zeros — `merges`, reported beside the results — the scan kernel takes
 * its -0 identity from its parameters, so its cases still run.)
 */
function unsupported(c) {
  if (PENDING_IN_BROWSER[c.op]) return PENDING_IN_BROWSER[c.op];
  const dtypes = [...c.inputs.map((s) => s.dtype), c.expected.dtype, c.params?.dtype];
  if (!kiln.hasF16() && dtypes.includes("f16")) return "f16: the adapter has no shader-f16 (SwiftShader)";
  return null;
}

export async function run(log) {
  const adapter = await kiln.init();
  const flushes = await flushesSubnormals();
  const merges = await mergesSignedZeros();
  const r = await fetch(BASE + "manifest.json");
  if (!r.ok) throw new Error(`manifest.json: HTTP ${r.status} (run make conformance-vectors)`);
  const m = await r.json();
  const fns = kiln.opFunctions(kiln);
  fns.kernel = kiln.Kernel;
  const ops = [...m.ops, ...(m.extra_ops ?? [])];
  const missing = ops.filter((op) => typeof fns[op] !== "function" && !PENDING_IN_BROWSER[op]);
  const cases = [];
  for (const c of m.cases) {
    const res = { id: c.id, op: c.op, status: "", sha256: "", message: "" };
    const why = unsupported(c);
    const held = [];
    if (typeof fns[c.op] !== "function" && !why) {
      Object.assign(res, { status: "missing", message: `op ${c.op} is not exposed by kiln.js` });
    } else if (why) {
      Object.assign(res, { status: "unsupported", message: why });
    } else {
      try {
        const ins = [];
        for (const s of c.inputs) {
          const t = await upload(s);
          held.push(t);
          ins.push([s.name, t]);
        }
        const y = await call(c.op, fns[c.op], c.params, ins);
        [res.status, res.sha256, res.message] = await check(c, y);
        if (!held.includes(y)) y.free();
      } catch (e) {
        Object.assign(res, { status: "error", message: `${e?.name ?? "Error"}: ${e?.message ?? e}` });
      }
    }
    held.forEach((t) => t.free());
    cases.push(res);
  }
  const npass = cases.filter((c) => c.status === "pass").length;
  const nuns = cases.filter((c) => c.status === "unsupported").length;
  log(`conformance (javascript, ${adapter.name}): ${npass}/${cases.length} cases pass, ${nuns} unsupported on this adapter`);
  for (const c of cases) if (!["pass", "unsupported"].includes(c.status)) log(`${c.status} ${c.id}: ${c.message}`);
  return {
    ok: cases.every((c) => c.status === "pass" || c.status === "unsupported") && !missing.length,
    report: {
      language: "javascript",
      binding: "kiln.js (wasm-bindgen) in headless Chromium",
      // Digests are compared with other languages only on the same adapter (compare.py).
      adapter: `WebGPU ${adapter.deviceType} adapter (${adapter.name || "SwiftShader"})`,
      flushes_subnormals: flushes,
      merges_signed_zeros: merges,
      missing_ops: missing,
      cases,
    },
  };
}
