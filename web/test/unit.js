// Tests of the browser package through its documented API only (kiln.js), against CPU
// references computed here in float64 on random inputs with awkward shapes and special values.
import * as kiln from "../js/kiln.js";

/** A seeded PRNG (mulberry32) for the inputs, so a failure reproduces. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomF32(n, r, scale = 2) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (r() - 0.5) * scale;
  return a;
}

function close(got, want, atol, rtol, what) {
  if (got.length !== want.length) throw new Error(`${what}: ${got.length} elements, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i];
    const w = want[i];
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w)) && g !== w) {
      throw new Error(`${what}: element ${i}: got ${g}, expected ${w}`);
    }
  }
}

function sameBits(got, want, what) {
  const g = new Uint8Array(got.buffer, got.byteOffset, got.byteLength);
  const w = new Uint8Array(want.buffer, want.byteOffset, want.byteLength);
  if (g.length !== w.length) throw new Error(`${what}: ${g.length} bytes, expected ${w.length}`);
  for (let i = 0; i < w.length; i++) if (g[i] !== w[i]) throw new Error(`${what}: byte ${i} differs`);
}

function expectError(f, codeName, what) {
  try {
    f();
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw new Error(`${what}: threw a non-KilnError: ${e}`);
    if (!(e instanceof kiln.errors[codeName])) throw new Error(`${what}: threw ${e.codeName}, expected ${codeName}`);
    if (e.code !== kiln.ERROR_CODES.find(([, n]) => n === codeName)[0]) throw new Error(`${what}: wrong code ${e.code}`);
    return e;
  }
  throw new Error(`${what}: no error thrown`);
}

function matmulRef(a, b, m, k, n) {
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
      out[i * n + j] = s;
    }
  return out;
}

async function expectReject(p, codeName, what) {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof kiln.errors[codeName])) throw new Error(`${what}: rejected with ${e?.codeName ?? e}, expected ${codeName}`);
    return;
  }
  throw new Error(`${what}: resolved, expected ${codeName}`);
}

/** The sort's order: -0 == +0, NaN above everything and equal to NaN. */
const cmpSort = (a, b) => (Number.isNaN(a) ? (Number.isNaN(b) ? 0 : 1) : Number.isNaN(b) ? -1 : a < b ? -1 : a > b ? 1 : 0);

/** f32 data with repeats, NaNs and both zeros. */
function awkwardF32(n, r) {
  const pool = [NaN, 0, -0, Infinity, -Infinity, 1.5, -2, 3];
  return Float32Array.from({ length: n }, () => (r() < 0.5 ? pool[Math.floor(r() * pool.length)] : Math.round((r() - 0.5) * 8)));
}

let log = () => {};

const tests = {
  async "init reports the adapter"() {
    const info = await kiln.init();
    if (typeof info.name !== "string" || info.maxComputeWorkgroupsPerDimension < 1) throw new Error(JSON.stringify(info));
    log(`adapter: ${JSON.stringify(info)}`);
    if ((await kiln.init()).name !== info.name) throw new Error("a second init gave another adapter");
  },

  async "typed arrays round-trip bit for bit, special values included"() {
    const f = new Float32Array([NaN, Infinity, -Infinity, 0, -0, 3.4e38, -3.4e38, 1e-45, -1e-45, 1.17549435e-38, 1, -2.5]);
    sameBits(await kiln.tensor(f).toArray(), f, "f32");
    const i = new Int32Array([0, -1, 2147483647, -2147483648, 7, -13]);
    sameBits(await kiln.tensor(i, [2, 3]).toArray(), i, "i32");
    const u = new Uint32Array([0, 1, 4294967295, 2147483648, 99]);
    sameBits(await kiln.tensor(u).toArray(), u, "u32");
    const h = new Uint16Array([0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3c00, 0x0001, 0x7bff]);
    const th = kiln.tensor(h, [8], "f16");
    if (th.dtype !== "f16") throw new Error(`Uint16Array gave ${th.dtype}`);
    sameBits(await th.toArray(), h, "f16 bits");
    // An empty tensor and a view into a bigger buffer.
    const e = kiln.tensor(new Float32Array(0), [0, 3]);
    if ((await e.toArray()).length !== 0 || e.shape.join() !== "0,3") throw new Error("empty tensor");
    const big = new Float32Array([9, 8, 7, 6, 5]);
    sameBits(await kiln.tensor(big.subarray(1, 4)).toArray(), big.subarray(1, 4), "subarray");
    const bytes = await kiln.tensor(u).toBytes();
    sameBits(bytes, new Uint8Array(u.buffer), "toBytes");
  },

  async "matmul matches a float64 reference on awkward shapes"() {
    const r = rng(1);
    for (const [m, k, n] of [[1, 1, 1], [7, 13, 5], [65, 33, 17], [2, 0, 3], [0, 4, 2], [31, 257, 3]]) {
      const a = randomF32(m * k, r);
      const b = randomF32(k * n, r);
      const y = kiln.matmul(kiln.tensor(a, [m, k]), kiln.tensor(b, [k, n]));
      if (y.shape.join() !== `${m},${n}`) throw new Error(`shape ${y.shape}`);
      close(await y.toArray(), matmulRef(a, b, m, k, n), 1e-4, 1e-4, `matmul ${m}x${k}x${n}`);
    }
  },

  // WGSL lets implementations assume no infinities or NaNs inside a shader, so only the cases
  // with a defined answer everywhere: -inf (a zero weight) and big finite values.
  async "softmax and sum match references, -inf and big values included"() {
    const r = rng(2);
    for (const [rows, cols] of [[1, 1], [3, 257], [5, 7]]) {
      const x = randomF32(rows * cols, r, 20);
      if (rows === 5) x.set([-Infinity, 80, -80, 3e4], 7);
      const got = await kiln.softmax(kiln.tensor(x, [rows, cols]), -1).toArray();
      const want = new Float64Array(rows * cols);
      for (let i = 0; i < rows; i++) {
        const row = Array.from(x.subarray(i * cols, (i + 1) * cols));
        const mx = Math.max(...row);
        const ex = row.map((v) => Math.exp(v - mx));
        const s = ex.reduce((p, q) => p + q, 0);
        ex.forEach((v, j) => (want[i * cols + j] = v / s));
      }
      close(got, want, 1e-6, 1e-5, `softmax ${rows}x${cols}`);
      const sums = await kiln.sum(kiln.tensor(x, [rows, cols]), 1).toArray();
      const wantSums = Array.from({ length: rows }, (_, i) => x.subarray(i * cols, (i + 1) * cols).reduce((p, q) => p + q, 0));
      close(sums, wantSums, 1e-3, 1e-5, `sum ${rows}x${cols}`);
    }
    const ints = new Int32Array([5, -7, 2147483647, 1]);
    const s = await kiln.sum(kiln.tensor(ints)).toArray();
    if (s.length !== 1 || s[0] !== ((5 - 7 + 2147483647 + 1) | 0)) throw new Error(`int sum ${s}`);
  },

  async "elementwise ops by their generated names, numbers on either side, broadcasting"() {
    const r = rng(3);
    const a = randomF32(3 * 7, r, 10);
    const b = randomF32(7, r, 10);
    const ta = kiln.tensor(a, [3, 7]);
    const tb = kiln.tensor(b, [7]);
    close(await kiln.subtract(ta, tb).toArray(), Array.from(a, (v, i) => v - b[i % 7]), 1e-6, 0, "subtract broadcast");
    close(await kiln.subtract(2, ta).toArray(), Array.from(a, (v) => 2 - v), 1e-6, 0, "2 - a");
    close(await kiln.multiply(ta, 0.5).toArray(), Array.from(a, (v) => v * 0.5), 0, 0, "a * 0.5");
    close(await kiln.exp(tb).toArray(), Array.from(b, Math.exp), 1e-5, 1e-5, "exp");
    // Comparisons give bool tensors, read back as a Uint8Array of 0/1.
    const g = kiln.greater(ta, tb);
    if (g.dtype !== "bool") throw new Error(`greater gave ${g.dtype}, not bool`);
    const gt = await g.toArray();
    if (!(gt instanceof Uint8Array) || gt.some((v, i) => v !== (a[i] > b[i % 7] ? 1 : 0))) throw new Error("greater");
    const m = kiln.tensor(Uint8Array.from([1, 0, 7, 0]));
    if (m.dtype !== "bool") throw new Error("a Uint8Array is a bool tensor");
    const anyAll = [await kiln.any(m).toArray(), await kiln.all(m).toArray()];
    if (anyAll[0][0] !== 1 || anyAll[1][0] !== 0) throw new Error(`any/all of [1, 0, 7, 0]: ${anyAll}`);
    close(await kiln.clip(tb, -0.5, 0.5).toArray(), Array.from(b, (v) => Math.min(Math.max(v, -0.5), 0.5)), 0, 0, "clip");
  },

  async "every op of the core's table has its function"() {
    const fns = kiln.opFunctions(kiln);
    const missing = kiln.OPS.filter((o) => typeof fns[o.name] !== "function").map((o) => o.name);
    if (missing.length) throw new Error(`missing: ${missing}`);
  },

  async "the seeded RNG repeats by seed and differs across seeds"() {
    const a = await kiln.randomUniform([1031], 42).toBytes();
    const b = await kiln.randomUniform([1031], 42).toBytes();
    const c = await kiln.randomUniform([1031], 43).toBytes();
    sameBits(a, b, "same seed");
    if (a.every((v, i) => v === c[i])) throw new Error("seeds 42 and 43 gave the same numbers");
    const u = new Float32Array(a.buffer);
    if (u.some((v) => !(v >= 0 && v < 1))) throw new Error("uniform out of [0, 1)");
    expectError(() => kiln.randomUniform([3], 1.5), "INVALID_ARGUMENT", "fractional seed");
  },

  async "custom WGSL kernels run, and bad ones fail with SHADER and line:column"() {
    const src = `@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&x)) { y[g.x] = x[g.x] * 2.0 + 1.0; }
}`;
    const k = await kiln.Kernel.compile(src);
    if (k.storageBindings !== 2 || k.workgroupSize[0] !== 64) throw new Error("reflection");
    const x = randomF32(130, rng(4));
    const tx = kiln.tensor(x);
    const ty = kiln.zeros([130]);
    k.dispatch([tx, ty], [3]);
    close(await ty.toArray(), Array.from(x, (v) => v * 2 + 1), 1e-6, 0, "kernel");
    const e = expectError(() => new kiln.Kernel("@compute @workgroup_size(1) fn main() { let a = ; }"), "SHADER", "bad WGSL");
    if (!/^1:\d+:/.test(e.message)) throw new Error(`no line:column in ${e.message}`);
    expectError(() => k.dispatch([tx], [1]), "INVALID_ARGUMENT", "wrong binding count");
    k.free();
  },

  // naga's WGSL front end recurses once per operator of a chain (`~~~x`): the deepest source
  // per byte. The page has no compile thread with a big stack: kiln-core bounds the operators
  // of a statement in the browser (1,000), so a deeper kernel is a SHADER error, not a trap
  // that would leave the module unusable; the browser's own compiler (Tint) then refuses unary
  // chains past ~128 levels, which Kernel.compile reports as SHADER too.
  async "deep kernels: compiled, or refused as SHADER, never a broken module"() {
    const head = "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n@compute @workgroup_size(1) fn main() {\nlet x = o[1];\no[0] = ";
    const tail = "x;\n}\n";
    for (const depth of [100, 99]) {
      const k = await kiln.Kernel.compile(head + "~".repeat(depth) + tail);
      const t = kiln.tensor(new Uint32Array([0, 0x12345678, 0, 0]));
      k.dispatch([t], [1]);
      const got = (await t.toArray())[0];
      const want = depth % 2 === 0 ? 0x12345678 : ~0x12345678 >>> 0;
      if (got !== want) throw new Error(`depth ${depth}: got ${got}, expected ${want}`);
    }
    const flat = (terms) => head.replace("o[0] = ", "o[0] = x") + "+x".repeat(terms - 1) + ";\n}\n";
    const sum = await kiln.Kernel.compile(flat(400));
    const t = kiln.tensor(new Uint32Array([0, 3, 0, 0]));
    sum.dispatch([t], [1]);
    if ((await t.toArray())[0] !== 1200) throw new Error("flat sum of 400 terms");
    const rejects = async (src, what, needle) => {
      try {
        await kiln.Kernel.compile(src);
      } catch (e) {
        if (!(e instanceof kiln.errors.SHADER)) throw new Error(`${what}: ${e}`);
        if (needle && !needle.test(e.message)) throw new Error(`${what}: ${e.message.slice(0, 200)}`);
        return;
      }
      throw new Error(`${what}: compiled`);
    };
    await rejects(head + "~".repeat(999) + tail, "999-deep chain (the browser's limit)");
    await rejects(flat(999), "999-term sum (the browser's limit)");
    // Refused again, not served from the pipeline cache as if it had compiled.
    await rejects(flat(999), "999-term sum, twice");
    await rejects(head + "~".repeat(1001) + tail, "1,001 operators", /operators/);
    await rejects(head + "~".repeat((64 << 10) - head.length - tail.length) + tail, "64 KiB chain", /operators/);
    const nested = "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n@compute @workgroup_size(1) fn main() { o[0] = " + "(".repeat(30000) + "1u; }";
    await rejects(nested, "30,000 nested parentheses");
    close(await kiln.add(kiln.ones([3]), 1).toArray(), [2, 2, 2], 0, 0, "an op after the hostile kernels");
  },

  async "errors are KilnError subclasses with the stable code"() {
    const a = kiln.tensor(new Float32Array(6), [2, 3]);
    const e = expectError(() => kiln.matmul(a, a), "SHAPE_MISMATCH", "matmul 2x3 by 2x3");
    if (!(e instanceof Error) || e.name !== "ShapeMismatchError" || e.code !== 3) throw new Error(`${e.name} ${e.code}`);
    expectError(() => kiln.tensor(new Float32Array(5), [2, 3]), "INVALID_ARGUMENT", "5 elements for 2x3");
    expectError(() => kiln.tensor([1, 2, 3]), "INVALID_ARGUMENT", "a plain array");
    expectError(() => kiln.astype(a, "f64"), "INVALID_ARGUMENT", "unknown dtype");
    expectError(() => kiln.softmax(a, 5), "INVALID_ARGUMENT", "axis out of range");
    if (!kiln.hasF16()) {
      const h = kiln.tensor(new Uint16Array(4), [4], "f16");
      expectError(() => kiln.exp(h), "UNSUPPORTED", "f16 op without shader-f16");
    }
  },

  async "free() and dispose() give memory back; optional tensors stay usable"() {
    await kiln.synchronize();
    const before = kiln.memoryStats().inUseBytes;
    const t = kiln.zeros([1024, 256]);
    const during = kiln.memoryStats().inUseBytes;
    if (during < before + 1024 * 256 * 4) throw new Error(`in use ${before} -> ${during}`);
    t.free();
    if (kiln.memoryStats().inUseBytes !== before) throw new Error("free() kept the buffer");
    const u = kiln.ones([64, 64]);
    u.dispose();
    if (kiln.memoryStats().inUseBytes !== before) throw new Error("dispose() kept the buffer");
    const x = kiln.tensor(randomF32(12, rng(5)), [3, 4]);
    const w = kiln.ones([4]);
    const b = kiln.zeros([4]);
    const y1 = await kiln.layerNorm(x, w, b).toArray();
    const y2 = await kiln.layerNorm(x, w, b).toArray();
    sameBits(y1, y2, "layerNorm twice with the same weight");
    if ((await w.toArray())[0] !== 1) throw new Error("weight unusable after the call");
  },

  async "sort, argsort, searchsorted, isin and countNonzero match references (NaN, -0, repeats)"() {
    const r = rng(17);
    for (const n of [1, 2, 7, 300]) {
      const v = awkwardF32(n, r);
      const x = kiln.tensor(v);
      const order = Array.from(v.keys()).sort((i, j) => cmpSort(v[i], v[j]) || i - j);
      sameBits(await kiln.argsort(x).toArray(), Int32Array.from(order), `argsort n=${n}`);
      const sorted = kiln.sort(x);
      const sv = await sorted.toArray();
      close(sv, order.map((i) => v[i]), 0, 0, `sort n=${n}`);
      const desc = Array.from(v.keys()).sort((i, j) => cmpSort(v[j], v[i]) || i - j);
      close(await kiln.sort(x, { descending: true }).toArray(), desc.map((i) => v[i]), 0, 0, `sort descending n=${n}`);
      const q = awkwardF32(11, r);
      const tq = kiln.tensor(q);
      for (const side of ["left", "right"]) {
        const want = Int32Array.from(q, (e) => sv.findIndex((s) => (side === "left" ? cmpSort(s, e) >= 0 : cmpSort(s, e) > 0)))
          .map((k) => (k < 0 ? n : k));
        sameBits(await kiln.searchsorted(sorted, tq, { side }).toArray(), want, `searchsorted ${side} n=${n}`);
      }
      const found = Uint8Array.from(q, (e) => (v.some((s) => s === e) ? 1 : 0));
      sameBits(await kiln.isin(tq, x).toArray(), found, `isin n=${n}`);
      sameBits(await kiln.isin(tq, x, { invert: true }).toArray(), found.map((b) => 1 - b), `isin invert n=${n}`);
      const nz = v.filter((e) => e !== 0).length;
      sameBits(await kiln.countNonzero(x).toArray(), new Int32Array([nz]), `countNonzero n=${n}`);
    }
    expectError(() => kiln.searchsorted(kiln.zeros([2]), kiln.zeros([2]), { side: "middle" }), "INVALID_ARGUMENT", "side");
  },

  async "nonzero and unique_* resolve to the references, and their input stays usable"() {
    const r = rng(23);
    for (const shape of [[1], [3, 1, 7], [2, 600]]) {
      const n = shape.reduce((a, b) => a * b, 1);
      const v = awkwardF32(n, r);
      const x = kiln.tensor(v, shape);
      const coords = await kiln.nonzero(x);
      if (coords.length !== shape.length) throw new Error(`nonzero gave ${coords.length} arrays for ${shape}`);
      const flat = [...v.keys()].filter((i) => v[i] !== 0);
      for (let d = 0; d < shape.length; d++) {
        const stride = shape.slice(d + 1).reduce((a, b) => a * b, 1);
        sameBits(await coords[d].toArray(), Int32Array.from(flat, (i) => Math.floor(i / stride) % shape[d]), `nonzero ${shape} dim ${d}`);
      }
      // Reference: stable sort, a new value where one differs from the one before (NaN != NaN).
      const order = [...v.keys()].sort((i, j) => cmpSort(v[i], v[j]) || i - j);
      const starts = order.map((_, k) => k).filter((k) => k === 0 || !(v[order[k]] === v[order[k - 1]]));
      const values = Float32Array.from(starts, (k) => v[order[k]]);
      const counts = Int32Array.from(starts, (k, u) => (starts[u + 1] ?? n) - k);
      const inverse = new Int32Array(n);
      starts.forEach((k, u) => order.slice(k, starts[u + 1] ?? n).forEach((i) => (inverse[i] = u)));
      const u = await kiln.uniqueAll(x);
      sameBits(await u.values.toArray(), values, `uniqueAll values ${shape}`);
      sameBits(await u.indices.toArray(), Int32Array.from(starts, (k) => order[k]), `uniqueAll indices ${shape}`);
      sameBits(await u.inverse_indices.toArray(), inverse, `uniqueAll inverse ${shape}`);
      if (Array.from(u.inverse_indices.shape).join() !== shape.join()) throw new Error("inverse_indices shape");
      sameBits(await u.counts.toArray(), counts, `uniqueAll counts ${shape}`);
      const c = await kiln.uniqueCounts(x);
      sameBits(await c.counts.toArray(), counts, `uniqueCounts ${shape}`);
      sameBits(await (await kiln.uniqueInverse(x)).inverse_indices.toArray(), inverse, `uniqueInverse ${shape}`);
      sameBits(await (await kiln.uniqueValues(x)).toArray(), values, `uniqueValues ${shape}`);
      sameBits(await x.toArray(), v, "the input after nonzero and unique_*");
    }
    const empty = await kiln.uniqueAll(kiln.zeros([0]));
    if (empty.values.numel !== 0 || empty.counts.numel !== 0) throw new Error("unique of nothing");
    const none = await kiln.nonzero(kiln.zeros([2, 3]));
    if (none.length !== 2 || none[0].numel !== 0) throw new Error("nonzero of zeros");
    await expectReject(kiln.nonzero(kiln.zeros([])), "INVALID_ARGUMENT", "nonzero of a 0-D tensor");
  },

  async "scans, prod, std, diff, vecdot and tensordot match float64 references"() {
    const r = rng(31);
    for (const n of [1, 5, 1031]) {
      const v = randomF32(n, r);
      const x = kiln.tensor(v);
      let acc = 0;
      close(await kiln.cumulativeSum(x).toArray(), Array.from(v, (e) => (acc += e)), 1e-4, 1e-4, `cumulativeSum n=${n}`);
      acc = 0;
      const withInit = [0, ...Array.from(v, (e) => (acc += e))];
      close(await kiln.cumulativeSum(x, { includeInitial: true }).toArray(), withInit, 1e-4, 1e-4, `cumulativeSum initial n=${n}`);
      const small = v.slice(0, 20);
      let p = 1;
      close(await kiln.cumulativeProd(kiln.tensor(small)).toArray(), Array.from(small, (e) => (p *= e)), 1e-6, 1e-5, `cumulativeProd n=${n}`);
      close(await kiln.prod(kiln.tensor(small)).toArray(), [p], 1e-6, 1e-5, `prod n=${n}`);
      const mean = v.reduce((a, b) => a + b, 0) / n;
      const sd = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / n);
      close(await kiln.std(x).toArray(), [sd], 1e-5, 1e-4, `std n=${n}`);
      close(await kiln.diff(x, { prepend: 1 }).toArray(), Array.from(v, (e, i) => e - (i ? v[i - 1] : 1)), 1e-6, 1e-6, `diff n=${n}`);
      close(await kiln.vecdot(x, x).toArray(), [v.reduce((a, b) => a + b * b, 0)], 1e-4, 1e-4, `vecdot n=${n}`);
    }
    const ci = await kiln.cumulativeSum(kiln.tensor(new Int32Array([2147483647, 1, 5])), { dtype: "i32" }).toArray();
    sameBits(ci, new Int32Array([2147483647, -2147483648, -2147483643]), "cumulativeSum wraps i32");
    const [m, k, n] = [3, 7, 5];
    const a = randomF32(m * k, r);
    const b = randomF32(k * n, r);
    const want = matmulRef(a, b, m, k, n);
    close(await kiln.tensordot(kiln.tensor(a, [m, k]), kiln.tensor(b, [k, n]), 1).toArray(), want, 1e-5, 1e-4, "tensordot 1");
    const bt = kiln.permuteDims(kiln.tensor(b, [k, n]), [1, 0]);
    close(await kiln.tensordot(kiln.tensor(a, [m, k]), bt, [[1], [1]]).toArray(), want, 1e-5, 1e-4, "tensordot pairs");
    expectError(() => kiln.cumulativeSum(kiln.zeros([2, 2])), "INVALID_ARGUMENT", "a 2-D scan without an axis");
    expectError(() => kiln.tensordot(kiln.zeros([2, 3]), kiln.zeros([2, 3]), 1), "SHAPE_MISMATCH", "tensordot sizes");
  },

  async "a page using only the documented API: matmul, softmax, a reduction, a kernel, a KilnError"() {
    const a = kiln.tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
    const y = kiln.softmax(kiln.matmul(a, a), -1);
    const m = await kiln.max(y, [1]).toArray();
    const want = [7, 10, 15, 22];
    const e0 = 1 / (1 + Math.exp(want[1] - want[0]));
    close(await y.toArray(), [e0, 1 - e0, 1 / (1 + Math.exp(7)), 1 - 1 / (1 + Math.exp(7))], 1e-6, 1e-5, "softmax(a@a)");
    close(m, [1 - e0, 1 - 1 / (1 + Math.exp(7))], 1e-6, 1e-5, "max");
    try {
      kiln.matmul(a, kiln.zeros([3, 3]));
      throw new Error("no error");
    } catch (e) {
      if (!(e instanceof kiln.KilnError) || e.codeName !== "SHAPE_MISMATCH") throw e;
    }
  },

  // Sessions (docs/DESIGN.md, "Sessions and untrusted kernels"): current only while synchronous
  // code runs, so every check below awaits outside `run`.
  async "sessions: quota, stats, close, and use after close"() {
    const before = kiln.memoryStats().inUseBytes;
    const r = rng(21);
    const n = 9 + Math.floor(r() * 8); // 36-64 bytes: one 64-byte size class
    const a = randomF32(n, r);
    const b = randomF32(n, r);
    const s = new kiln.Session({ maxBytes: 3 * 64 });
    const [ta, tb, tc] = s.run(() => {
      const ta = kiln.tensor(a);
      const tb = kiln.tensor(b);
      return [ta, tb, kiln.add(ta, tb)];
    });
    const e = s.run(() => expectError(() => kiln.zeros([1]), "QUOTA_EXCEEDED", "over the quota"));
    if (e.code !== 6) throw new Error(`QUOTA_EXCEEDED is code ${e.code}`);
    // Outside run the default session is current again: no limit, not counted.
    const outside = kiln.zeros([1000]);
    close(await tc.toArray(), Array.from(a, (v, i) => Math.fround(v + b[i])), 0, 0, "a + b in a session");
    const st = s.stats();
    if (st.bytesInUse !== 192 || st.liveBuffers !== 3 || st.quotaExceeded !== 1 || st.dispatches < 1 || st.closed)
      throw new Error(`stats ${JSON.stringify(st)}`);
    s.close();
    s.close();
    const after = s.stats();
    if (!after.closed || after.bytesInUse !== 0 || after.liveBuffers !== 0 || !s.closed) throw new Error(`after close ${JSON.stringify(after)}`);
    await expectReject(tc.toArray(), "INVALID_ARGUMENT", "a closed session's tensor");
    expectError(() => kiln.add(ta, tb), "INVALID_ARGUMENT", "an op on a closed session's tensors");
    expectError(() => s.run(() => kiln.zeros([1])), "INVALID_ARGUMENT", "work in a closed session");
    close(await outside.toArray(), new Float64Array(1000), 0, 0, "the default session's tensor");
    [ta, tb, tc, outside].forEach((t) => t.free());
    s.free();
    // At most what it was: tensors of earlier tests the garbage collector finalized meanwhile
    // may have given memory back too.
    if (kiln.memoryStats().inUseBytes > before) throw new Error(`memory left: ${kiln.memoryStats().inUseBytes - before} bytes`);
  },

  async "sessions: run is synchronous, enter/exit pair, bad limits refused"() {
    const s = new kiln.Session({ maxBytes: 1 << 16 });
    const e = expectError(() => s.run(async () => kiln.zeros([4])), "INVALID_ARGUMENT", "an async fn");
    if (!/synchronous/.test(e.message)) throw new Error(e.message);
    // A throwing fn leaves the session too.
    try {
      s.run(() => {
        throw new RangeError("mine");
      });
      throw new Error("no error");
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
    }
    const live = s.stats().liveBuffers;
    const t = kiln.zeros([4]);
    if (s.stats().liveBuffers !== live) throw new Error("the session stayed current after run");
    s.enter();
    const inner = new kiln.Session();
    inner.run(() => kiln.zeros([2]).free());
    const u = kiln.zeros([8]);
    s.exit();
    if (s.stats().liveBuffers !== live + 1) throw new Error("enter/exit: the tensor is not the session's");
    expectError(() => s.exit(), "INVALID_ARGUMENT", "exit without enter");
    for (const bad of [{ maxBytes: -1 }, { maxBytes: 1.5 }, { maxLoopIterations: 2 ** 32 }, { allowF16: 1 }, { max_bytes: 1 }, 7]) {
      expectError(() => new kiln.Session(bad), "INVALID_ARGUMENT", `limits ${JSON.stringify(bad)}`);
    }
    [t, u].forEach((x) => x.free());
    inner.close();
    s.close();
  },

  async "sessions: loop and operation budgets give COMPUTE_LIMIT, the device carries on"() {
    const spin = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n@compute @workgroup_size(1) fn main() { loop { x[0] = x[0] + 1.0; } }";
    const triangle = `@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x;
  if (i >= arrayLength(&x)) { return; }
  var s = 0u;
  for (var j = 0u; j < n[i]; j++) { s += j; }
  x[i] = s;
}`;
    // A dispatch counts invocations x (1 + loop budget) x operations per pass (1 for kernels this
    // small): 3 workgroups of 64 x 101 fit exactly.
    const s = new kiln.Session({ maxLoopIterations: 100, maxOpsPerDispatch: 3 * 64 * 101 });
    const r = rng(22);
    const counts = Uint32Array.from({ length: 131 }, () => Math.floor(r() * 100));
    const tri = await s.compileKernel(triangle);
    const [tn, tx] = s.run(() => [kiln.tensor(counts), kiln.zeros([131], "u32")]);
    s.run(() => tri.dispatch([tn, tx], [3]));
    close(await tx.toArray(), Array.from(counts, (c) => (c * (c - 1)) / 2), 0, 0, "loops within the budget");
    const k = await s.compileKernel(spin);
    const x = s.run(() => kiln.zeros([4]));
    s.run(() => k.dispatch([x], [1]));
    await expectReject(x.toArray(), "COMPUTE_LIMIT", "a loop without end");
    // 4 workgroups of 64 invocations is over the per-dispatch budget: refused before queuing.
    const big = s.run(() => [kiln.tensor(new Uint32Array(4 * 64)), kiln.tensor(new Uint32Array(4 * 64))]);
    expectError(() => s.run(() => tri.dispatch(big, [4])), "COMPUTE_LIMIT", "over maxOpsPerDispatch");
    if (s.stats().computeLimitHits !== 2 || s.stats().kernelsCompiled !== 2) throw new Error(`stats ${JSON.stringify(s.stats())}`);
    // The policy refuses at compile time, asynchronously too.
    const strict = new kiln.Session({ maxWorkgroupInvocations: 32 });
    await expectReject(strict.compileKernel(triangle), "SHADER", "over the policy's workgroup size");
    if (strict.stats().policyRejections !== 1) throw new Error("policy rejection not counted");
    // Everything else carries on.
    const y = kiln.multiply(kiln.tensor(new Float32Array([1.5, -2])), 2);
    close(await y.toArray(), [3, -4], 0, 0, "after COMPUTE_LIMIT");
    s.close();
    strict.close();
  },

  async "sessions: 1000 at once, interleaved across awaits"() {
    const before = kiln.memoryStats().inUseBytes;
    const count = 1000;
    const sessions = Array.from({ length: count }, () => new kiln.Session({ maxBytes: 3 * 64 }));
    // Every task creates its tensors inside run, then awaits (the other tasks run meanwhile).
    const results = await Promise.all(
      sessions.map(async (s, i) => {
        const r = rng(1000 + i);
        const n = 9 + (i % 8);
        const a = randomF32(n, r);
        const b = randomF32(n, r);
        const c = s.run(() => kiln.add(kiln.tensor(a), kiln.tensor(b)));
        await null;
        const refused = s.run(() => {
          try {
            kiln.zeros([4 * 16]);
            return "none";
          } catch (e) {
            return e.codeName;
          }
        });
        const got = await c.toArray();
        const right = got.every((v, j) => v === Math.fround(a[j] + b[j]));
        return { refused, right, held: s.stats().bytesInUse, c };
      }),
    );
    const held = sessions.reduce((acc, s) => acc + s.stats().bytesInUse, 0);
    for (const [i, r] of results.entries()) {
      if (r.refused !== "QUOTA_EXCEEDED" || !r.right) throw new Error(`session ${i}: ${JSON.stringify(r)}`);
    }
    for (const s of sessions) s.close();
    const left = sessions.reduce((acc, s) => acc + s.stats().bytesInUse + s.stats().liveBuffers, 0);
    results.forEach((r) => r.c.free());
    sessions.forEach((s) => s.free());
    if (left !== 0) throw new Error(`${left} bytes and buffers left in closed sessions`);
    if (held < count * 64) throw new Error(`only ${held} bytes held with every session open`);
    // At most what it was: tensors of earlier tests the garbage collector finalized meanwhile
    // may have given memory back too.
    if (kiln.memoryStats().inUseBytes > before) throw new Error(`memory left: ${kiln.memoryStats().inUseBytes - before} bytes`);
  },
};

export async function run(logLine) {
  log = logLine;
  const results = [];
  for (const [name, f] of Object.entries(tests)) {
    const t0 = performance.now();
    try {
      await f();
      results.push({ name, ok: true });
      log(`ok   ${name} (${(performance.now() - t0).toFixed(0)} ms)`);
    } catch (e) {
      results.push({ name, ok: false, error: String(e?.stack ?? e) });
      log(`FAIL ${name}: ${e?.stack ?? e}`);
    }
  }
  return { ok: results.every((r) => r.ok), results, adapter: kiln.adapterInfo() };
}
