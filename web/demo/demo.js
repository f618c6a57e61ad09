// The demo page: every elementwise op of the generated table and a few others, run on small
// random inputs and compared with references computed here; then a matmul benchmark.
import * as kiln from "../js/kiln.js";

const erf = (x) => {
  // Numerical Recipes' erfc fit (fractional error below 1.2e-7): JavaScript has no erf.
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? y : -y;
};
const UNARY = {
  neg: (x) => -x, abs: Math.abs, exp: Math.exp, log: Math.log, sqrt: Math.sqrt, rsqrt: (x) => 1 / Math.sqrt(x),
  sin: Math.sin, cos: Math.cos, tanh: Math.tanh, sigmoid: (x) => 1 / (1 + Math.exp(-x)), relu: (x) => Math.max(x, 0),
  gelu: (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)),
  gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
  silu: (x) => x / (1 + Math.exp(-x)), floor: Math.floor,
};
const BINARY = {
  add: (a, b) => a + b, sub: (a, b) => a - b, mul: (a, b) => a * b, div: (a, b) => a / b, pow: (a, b) => a ** b,
  maximum: Math.max, minimum: Math.min, eq: (a, b) => +(a === b), ne: (a, b) => +(a !== b), lt: (a, b) => +(a < b),
  le: (a, b) => +(a <= b), gt: (a, b) => +(a > b), ge: (a, b) => +(a >= b),
};

function maxErr(got, want) {
  let e = 0;
  for (let i = 0; i < want.length; i++) e = Math.max(e, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
  return e;
}

async function rows(add) {
  const n = 257;
  const a = Float32Array.from({ length: n }, (_, i) => 0.25 + ((i * 7919) % 1000) / 250);
  const b = Float32Array.from({ length: n }, (_, i) => 0.5 + ((i * 104729) % 1000) / 400);
  const ta = kiln.tensor(a);
  const tb = kiln.tensor(b);
  for (const o of kiln.OPS) {
    const f = kiln[o.js];
    if (o.family === "unary") {
      if (!UNARY[o.name]) add(o.js, "skip", "no reference in the demo");
      else add(o.js, maxErr(await f(ta).toArray(), Array.from(a, UNARY[o.name])), 1e-4);
    } else if (o.family === "binary" || o.family === "compare") {
      if (!BINARY[o.name]) add(o.js, "skip", "no reference in the demo");
      else add(o.js, maxErr(await f(ta, tb).toArray(), Array.from(a, (v, i) => BINARY[o.name](v, b[i]))), 1e-4);
    }
  }
  const m = kiln.tensor(a.subarray(0, 12), [3, 4]);
  const w = kiln.tensor(b.subarray(0, 20), [4, 5]);
  const want = [];
  for (let i = 0; i < 3; i++) for (let j = 0; j < 5; j++) want.push([0, 1, 2, 3].reduce((s, p) => s + a[i * 4 + p] * b[p * 5 + j], 0));
  add("matmul", maxErr(await kiln.matmul(m, w).toArray(), want), 1e-5);
  const sm = Array.from(a.subarray(0, 4), Math.exp);
  add("softmax", maxErr(await kiln.softmax(kiln.tensor(a.subarray(0, 4))).toArray(), sm.map((v) => v / sm.reduce((p, q) => p + q))), 1e-5);
  add("sum", maxErr(await kiln.sum(ta).toArray(), [a.reduce((p, q) => p + q, 0)]), 1e-5);
  add("max", maxErr(await kiln.max(ta).toArray(), [Math.max(...a)]), 0);
  const r = await kiln.randomUniform([1000], 7).toArray();
  add("randomUniform", r.every((v) => v >= 0 && v < 1) ? 0 : 1, 0);
  const k = await kiln.Kernel.compile(`@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&y)) { y[g.x] = y[g.x] * 3.0; }
}`);
  const ty = kiln.tensor(a);
  k.dispatch([ty], [Math.ceil(n / 64)]);
  add("custom kernel", maxErr(await ty.toArray(), Array.from(a, (v) => v * 3)), 1e-6);
}

async function bench() {
  const n = 256;
  const a = kiln.randomUniform([n, n], 1);
  const b = kiln.randomUniform([n, n], 2);
  await kiln.matmul(a, b).toArray();
  const iters = 10;
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) kiln.matmul(a, b).free();
  await kiln.synchronize();
  const s = (performance.now() - t0) / 1000 / iters;
  return `${n}×${n}×${n} f32: ${(s * 1000).toFixed(2)} ms per matmul, ${((2 * n ** 3) / s / 1e9).toFixed(2)} GFLOP/s`;
}

const table = document.getElementById("rows");
const results = [];
function add(op, err, tol) {
  const tr = table.insertRow();
  tr.insertCell().textContent = op;
  const status = err === "skip" ? "skip" : err <= tol ? "ok" : "fail";
  const c = tr.insertCell();
  c.textContent = status;
  c.className = status;
  tr.insertCell().textContent = err === "skip" ? tol : err.toExponential(2);
  results.push({ op, status });
}

try {
  const info = await kiln.init();
  document.getElementById("adapter").textContent =
    `adapter: ${info.name || "(name hidden by the browser)"} (${info.deviceType}, ${info.backend}, shader-f16: ${info.shaderF16})`;
  await rows(add);
  const benchText = await bench();
  document.getElementById("bench").textContent = benchText;
  const bad = results.filter((r) => r.status === "fail");
  const ok = results.filter((r) => r.status === "ok").length;
  document.getElementById("summary").textContent = bad.length ? `${bad.length} rows FAILED` : `all ${ok} rows ok`;
  window.kilnResult = { ok: bad.length === 0 && ok > 0, rows: results, bench: benchText, adapter: info };
} catch (e) {
  document.getElementById("summary").textContent = `error: ${e}`;
  window.kilnResult = { ok: false, error: String(e) };
}
