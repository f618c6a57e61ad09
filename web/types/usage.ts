// Type-checks kiln.d.ts against a page's typical use (`make web-types`: tsc --noEmit --strict).
// Never run: it only has to compile, and the @ts-expect-error lines have to fail to.
import * as kiln from "../js/kiln.js";
import { KilnError, Tensor, Kernel, errors } from "../js/kiln.js";

export async function page(): Promise<number> {
  const info: kiln.AdapterInfo = await kiln.init();
  const f16: boolean = info.shaderF16 && kiln.hasF16();
  const a: Tensor = kiln.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
  const b = Tensor.fromArray(new Float32Array(12), [3, 4], "f32");
  const c = kiln.matmul(a, b);
  const p = kiln.softmax(c, -1);
  const s = kiln.sum(p, [1], true);
  const m = kiln.mean(kiln.multiply(s, 2), null);
  const y = kiln.divide(1, kiln.add(kiln.exp(kiln.negative(a)), 1.0));
  const v = kiln.var(a, 0);
  const n = kiln.layerNorm(a, null, null, 1e-5);
  const r = kiln.rope(kiln.reshape(a, [1, 2, 3]).reshape([2, 3]), 0, 10000);
  const at = kiln.attention(a, a, a, { causal: true, scale: null });
  const cmp: Tensor = kiln.less(a, 3);
  const i = kiln.tensor(new Int32Array([1, 2]), [2], "i32");
  const kernel: Kernel = await Kernel.compile("@compute @workgroup_size(1) fn main() {}", "main");
  kernel.dispatch([a], [1, 1, 1], null);
  kernel.dispatch([a], 1);
  const ws: Uint32Array = kernel.workgroupSize;
  const out: kiln.TypedArray = await y.toArray();
  const bytes: Uint8Array = await m.toBytes();
  const shape: number[] = Array.from(p.shape);
  await kiln.synchronize();
  const stats = kiln.memoryStats();
  const session = new kiln.Session({ maxBytes: 1 << 20, maxOpsTotal: 1e9, allowAtomics: false });
  const owned: Tensor = session.run(() => kiln.add(a, 1));
  const sk: Kernel = await session.compileKernel("@compute @workgroup_size(1) fn main() {}");
  session.enter();
  session.exit();
  const ss: kiln.SessionStats = session.stats();
  const inUse: number = ss.bytesInUse + (session.closed ? 1 : 0) + session.id;
  session.close();
  // @ts-expect-error: limits are named fields
  new kiln.Session({ max_bytes: 1 });
  try {
    kiln.matmul(a, a);
  } catch (e) {
    if (e instanceof KilnError) {
      const code: number = e.code;
      const name: string = e.codeName;
      const isShape: boolean = e instanceof errors.SHAPE_MISMATCH;
      console.log(code, name, isShape);
    }
  }
  for (const t of [a, b, c, p, s, m, y, v, n, r, at, cmp, i]) {
    t.free();
  }
  kernel.free();
  // @ts-expect-error: dtypes are a closed set
  kiln.zeros([2], "f64");
  // @ts-expect-error: shapes are arrays of numbers
  kiln.tensor(new Float32Array(1), "1");
  // @ts-expect-error: toArray is asynchronous
  const wrong: Float32Array = y.toArray();
  console.log(f16, out.length, bytes.length, shape, stats.peakBytes, ws[0], wrong, owned, sk, inUse);
  return info.maxBufferSize;
}

// The Array API's sorting, searching, set, scan and contraction functions.
export async function arrayApi(a: Tensor): Promise<number> {
  const sorted: Tensor = kiln.sort(a, { axis: -1, descending: true });
  const order = kiln.argsort(a, {});
  const at = kiln.searchsorted(sorted, a, { side: "right" });
  const nz: Tensor[] = await kiln.nonzero(a);
  const u: kiln.UniqueAllResult = await kiln.uniqueAll(a);
  const { values, counts } = await kiln.uniqueCounts(a);
  const inv: Tensor = (await kiln.uniqueInverse(a)).inverse_indices;
  const uv: Tensor = await kiln.uniqueValues(a);
  const found = kiln.isin(a, uv, { invert: false });
  const cs = kiln.cumulativeSum(a, { axis: 0, dtype: "f32", includeInitial: true });
  const cp = kiln.cumulativeProd(a);
  const pr = kiln.prod(a, [0], false, "f32");
  const sd = kiln.std(a, null, true, 1);
  const d = kiln.diff(a, { axis: 0, n: 2, prepend: 0, append: a });
  const vd = kiln.vecdot(a, a, -1);
  const td = kiln.tensordot(a, a, [[0], [0]]);
  const td2 = kiln.tensordot(a, a, 1);
  const cnt = kiln.countNonzero(a, [0, 1], true);
  // @ts-expect-error: nonzero resolves (its output size is read back)
  const sync: Tensor[] = kiln.nonzero(a);
  // @ts-expect-error: side is "left" or "right"
  kiln.searchsorted(sorted, a, { side: "middle" });
  console.log(sync, u.inverse_indices.shape, nz.length);
  for (const t of [sorted, order, at, values, counts, inv, uv, found, cs, cp, pr, sd, d, vd, td, td2, cnt]) {
    t.free();
  }
  return u.counts.numel;
}

export async function models(onText: (s: string) => void): Promise<number> {
  const emb = await kiln.models.SentenceEmbedder.load("/models/all-MiniLM-L6-v2", {
    dtype: "f32",
    onProgress: (p: kiln.LoadProgress) => console.log(p.stage, p.loaded, p.total),
  });
  const v: Float32Array = await emb.encode(["a sentence", "another"], { normalize: true, batchSize: 32 });
  const dim: number = emb.dimension;
  const lm = await kiln.models.CausalLM.load(new Uint8Array(8), { cache: false });
  for await (const piece of lm.stream(lm.chatPrompt("Hi"), { maxNewTokens: 4, temperature: 0, stop: ["\n"] })) onText(piece);
  const text: string = await lm.generate("x", { maxNewTokens: 2, topK: 40, topP: 0.9, seed: 1 });
  const ids: Uint32Array = lm.tokenize(text);
  // @ts-expect-error: dtype is "f32" or "f16"
  await kiln.models.SentenceEmbedder.load("/m", { dtype: "f64" });
  emb.free();
  lm.free();
  return v.length + dim + ids.length + (lm.lastStats?.decodeTokensPerS ?? 0);
}
