// kiln.models in the page against the native run of the same models (models/tests/
// web_reference.rs wrote build/web/models-reference/: `make web-models-reference`, on native
// lavapipe while the page runs on SwiftShader: two adapters, one result): MiniLM f32
// embeddings bit for bit, the tiny decoder's greedy and seeded tokens identical, plus the
// page's own duties (progress stages, Cache Storage, yielding between tokens, clear errors,
// use-after-free as a KilnError).
import * as kiln from "../js/kiln.js";

const REF = "../../build/web/models-reference/";

function sameBits(got, wantBits, what) {
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length);
  if (g.length !== wantBits.length) throw new Error(`${what}: ${g.length} values, expected ${wantBits.length}`);
  let diff = 0;
  let first = -1;
  for (let i = 0; i < g.length; i++) {
    if (g[i] !== wantBits[i]) {
      diff++;
      if (first < 0) first = i;
    }
  }
  if (diff) {
    const f = new Float32Array(new Uint32Array([wantBits[first]]).buffer)[0];
    throw new Error(`${what}: ${diff} of ${g.length} values differ from native, first at ${first}: ${got[first]} vs ${f}`);
  }
}

function sameList(got, want, what) {
  const g = Array.from(got);
  if (JSON.stringify(g) !== JSON.stringify(want)) throw new Error(`${what}: got [${g}], native [${want}]`);
}

async function rejects(f, codeName, pattern, what) {
  try {
    await f();
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw new Error(`${what}: threw ${e?.name}: ${e?.message}, not a KilnError`);
    if (e.codeName !== codeName) throw new Error(`${what}: ${e.codeName} (${e.message}), expected ${codeName}`);
    if (pattern && !pattern.test(e.message)) throw new Error(`${what}: message ${JSON.stringify(e.message)} lacks ${pattern}`);
    return e.message;
  }
  throw new Error(`${what}: did not throw`);
}

/** Counts event-loop turns other tasks got while `f` ran. */
async function ticksDuring(f) {
  let ticks = 0;
  let on = true;
  const tick = () => {
    if (!on) return;
    ticks++;
    setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  const value = await f();
  on = false;
  return { value, ticks };
}

export async function run(log) {
  const adapter = await kiln.init();
  const results = [];
  const numbers = {};
  const test = async (name, f) => {
    const t0 = performance.now();
    try {
      const note = await f();
      log(`ok   ${name} (${((performance.now() - t0) / 1000).toFixed(1)} s)${note ? ": " + note : ""}`);
      results.push(true);
    } catch (e) {
      log(`FAIL ${name}: ${e?.stack ?? e}`);
      results.push(false);
    }
  };
  const ref = await (await fetch(REF + "reference.json")).json();
  const stages = new Set();
  let emb = null;

  await test("SentenceEmbedder.load from the folder URL (empty cache): download, upload, compile stages", async () => {
    await caches.delete(kiln.models.CACHE_NAME);
    const seen = [];
    const t0 = performance.now();
    emb = await kiln.models.SentenceEmbedder.load(REF + "minilm", {
      dtype: "f32",
      onProgress: (p) => {
        stages.add(p.stage);
        seen.push(p);
      },
    });
    numbers.embedderLoadColdMs = performance.now() - t0;
    numbers.embedderGpuBytes = kiln.memoryStats().inUseBytes;
    // The page's first load: the heap's size is its peak. model.safetensors streams into the
    // GPU tensor by tensor, so the heap stays under the file's size (the whole-file load took
    // 109,248,512 bytes: the 91 MB file copied in, then uploaded).
    numbers.embedderWasmHeapBytes = kiln.memoryStats().wasmHeapBytes;
    for (const s of ["download", "upload", "compile"]) if (!stages.has(s)) throw new Error(`no ${s} progress`);
    const last = seen.filter((p) => p.stage === "download").at(-1);
    if (!(last.total > 80e6 && last.loaded === last.total)) throw new Error(`download ended at ${last.loaded} of ${last.total}`);
    if (!(numbers.embedderWasmHeapBytes < 88e6)) throw new Error(`wasm heap ${numbers.embedderWasmHeapBytes} bytes after the load: the file went in whole`);
    if (emb.dimension !== ref.dimension || emb.dtype !== "f32" || !emb.normalizes) throw new Error("model facts");
    return `${(numbers.embedderLoadColdMs / 1000).toFixed(1)} s, ${last.total} bytes, wasm heap ${numbers.embedderWasmHeapBytes} bytes`;
  });

  await test("encode (normalize by modules.json, batch 32): bit-identical to native f32", async () => {
    const t0 = performance.now();
    const v = await emb.encode(ref.sentences);
    numbers.embedMs = performance.now() - t0;
    if (!(v instanceof Float32Array) || v.length !== ref.sentences.length * emb.dimension) throw new Error("shape");
    sameBits(v, ref.normalized.bits, "normalized");
    return `${ref.sentences.length} texts in ${numbers.embedMs.toFixed(0)} ms (native: ${ref.adapter})`;
  });

  await test("encode (normalize false, batch 2: ragged, reordered batches): bit-identical to native", async () => {
    const v = await emb.encode(ref.sentences, { normalize: false, batchSize: 2 });
    sameBits(v, ref.pooled.bits, "pooled");
  });

  let alone = null;
  await test("encode: a string alone, an empty list, bad options", async () => {
    // Alone, the text runs through smaller matmuls than in the batch (kernels picked by shape,
    // natively too): close to its batch row, not necessarily the same bits.
    alone = await emb.encode(ref.sentences[0]);
    const row = new Float32Array(new Uint32Array(ref.normalized.bits.slice(0, emb.dimension)).buffer);
    const worst = Math.max(...row.map((w, i) => Math.abs(alone[i] - w)));
    if (!(alone.length === emb.dimension && worst < 1e-5)) throw new Error(`one string: ${alone.length} values, off by ${worst}`);
    const none = await emb.encode([]);
    if (none.length !== 0) throw new Error("empty list");
    await rejects(() => emb.encode([1]), "INVALID_ARGUMENT", /text 0/, "a number as text");
    await rejects(() => emb.encode(["a"], { batchSize: 0 }), "INVALID_ARGUMENT", /batchSize/, "batchSize 0");
    const ids = emb.tokenize("Hello world");
    if (ids[0] !== 101 || ids.at(-1) !== 102) throw new Error(`tokenize: ${ids}`);
  });

  await test("SentenceEmbedder.load again (warm cache): nothing downloaded", async () => {
    const before = performance.getEntriesByType("resource").filter((r) => r.name.endsWith("model.safetensors")).length;
    const t0 = performance.now();
    const again = await kiln.models.SentenceEmbedder.load(REF + "minilm");
    numbers.embedderLoadWarmMs = performance.now() - t0;
    const after = performance.getEntriesByType("resource").filter((r) => r.name.endsWith("model.safetensors")).length;
    if (after !== before) throw new Error(`model.safetensors fetched ${after - before} more times`);
    sameBits(await again.encode(ref.sentences[0]), new Uint32Array(alone.buffer), "the same text from the cached files");
    again.free();
    return `${(numbers.embedderLoadWarmMs / 1000).toFixed(1)} s`;
  });

  await test("free: later calls are KilnErrors; free during encode waits for it", async () => {
    const pending = emb.encode(ref.sentences.slice(0, 2));
    emb.free();
    const v = await pending;
    sameBits(v, ref.normalized.bits.slice(0, 2 * 384), "the encode in flight");
    await rejects(() => emb.encode(["x"]), "INVALID_ARGUMENT", /freed/, "encode after free");
    await rejects(() => emb.tokenize("x"), "INVALID_ARGUMENT", /freed/, "tokenize after free");
    emb.free();
  });

  await test("SentenceEmbedder.load errors: 404, a missing file, f16 without shader-f16", async () => {
    await rejects(() => kiln.models.SentenceEmbedder.load(REF + "no-such-folder", { cache: false }), "INVALID_ARGUMENT", /404/, "404");
    await rejects(() => kiln.models.SentenceEmbedder.load({ "config.json": new Uint8Array(2) }), "INVALID_ARGUMENT", /config\.json/, "bad config");
    if (!adapter.shaderF16) {
      await rejects(() => kiln.models.SentenceEmbedder.load(REF + "minilm", { dtype: "f16" }), "UNSUPPORTED", /SHADER_F16/, "f16");
    }
  });

  const gguf = new Uint8Array(await (await fetch(REF + "tiny-llama.gguf")).arrayBuffer());
  let lm = null;
  await test("CausalLM.load from bytes: upload and compile stages", async () => {
    const seen = new Set();
    const before = kiln.memoryStats().inUseBytes;
    lm = await kiln.models.CausalLM.load(gguf.buffer, { onProgress: (p) => seen.add(p.stage) });
    numbers.tinyLmGpuBytes = kiln.memoryStats().inUseBytes - before;
    if (!seen.has("upload") || !seen.has("compile")) throw new Error(`stages ${[...seen]}`);
    sameList(lm.tokenize(ref.tiny.prompt), ref.tiny.promptTokens, "tokenize");
  });

  await test("CausalLM greedy: tokens and text identical to native", async () => {
    const t = ref.tiny.greedy;
    const text = await lm.generate(ref.tiny.prompt, { maxNewTokens: t.maxNewTokens, temperature: 0, stopAtEos: false });
    sameList(lm.lastTokens, t.tokens, "greedy tokens");
    if (text !== t.text) throw new Error(`text ${JSON.stringify(text)} vs native ${JSON.stringify(t.text)}`);
    return `${lm.lastStats.decodeTokensPerS.toFixed(1)} tokens/s decode`;
  });

  await test("CausalLM seeded sampling: tokens identical to native", async () => {
    const t = ref.tiny.sampled;
    const opts = { maxNewTokens: t.maxNewTokens, temperature: t.temperature, topK: t.topK, topP: t.topP, seed: t.seed, stopAtEos: false };
    const text = await lm.generate(ref.tiny.prompt, opts);
    sameList(lm.lastTokens, t.tokens, "sampled tokens");
    if (text !== t.text) throw new Error(`text ${JSON.stringify(text)}`);
  });

  await test("stream: an async iterator that yields to the event loop between tokens", async () => {
    const { value: pieces, ticks } = await ticksDuring(async () => {
      const out = [];
      for await (const p of lm.stream(ref.tiny.prompt, { maxNewTokens: 6, stopAtEos: false })) out.push(p);
      return out;
    });
    if (pieces.join("") !== ref.tiny.greedy.text.slice(0, pieces.join("").length) || pieces.length !== 6) {
      throw new Error(`pieces ${JSON.stringify(pieces)}`);
    }
    if (ticks < 6) throw new Error(`other tasks ran ${ticks} times during 6 tokens`);
    return `${ticks} timer turns ran meanwhile`;
  });

  await test("pipelined decode (lookahead 8): the tokens of one token at a time (tokens/s of each)", async () => {
    // lookahead 0: each token read back before the next is recorded (the loop the pipelined one
    // replaced); 1 and 3: read windows cut at other places. All must give native's tokens.
    const g = ref.tiny.greedy;
    const rate = {};
    for (const lookahead of [0, 1, 3, undefined]) {
      await lm.generate(ref.tiny.prompt, { maxNewTokens: g.maxNewTokens, stopAtEos: false, lookahead });
      sameList(lm.lastTokens, g.tokens, `greedy tokens, lookahead ${lookahead ?? "default"}`);
      rate[lookahead ?? 8] = lm.lastStats.decodeTokensPerS;
    }
    const s = ref.tiny.sampled;
    const opts = { maxNewTokens: s.maxNewTokens, temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, stopAtEos: false };
    await lm.generate(ref.tiny.prompt, { ...opts, lookahead: 0 });
    sameList(lm.lastTokens, s.tokens, "sampled tokens, lookahead 0");
    await rejects(() => lm.generate("x", { lookahead: 65 }), "INVALID_ARGUMENT", /lookahead/, "lookahead 65");
    await rejects(() => lm.generate("x", { lookahead: 1.5 }), "INVALID_ARGUMENT", /lookahead/, "lookahead 1.5");
    numbers.tinyDecodeTokensPerS = rate;
    return `decode tokens/s by lookahead ${JSON.stringify(Object.fromEntries(Object.entries(rate).map(([k, v]) => [k, +v.toFixed(1)])))}`;
  });

  await test("stop strings, bad options, no chat template", async () => {
    const t = ref.tiny.greedy.text;
    const cut = await lm.generate(ref.tiny.prompt, { maxNewTokens: 12, stop: t.slice(2, 4), stopAtEos: false });
    if (cut !== t.slice(0, 2)) throw new Error(`stop: ${JSON.stringify(cut)}`);
    // The pipelined loop recorded tokens past the stop: none of them is handed out or counted.
    const kept = Array.from(lm.lastTokens);
    if (!(kept.length < 12 && kept.length === lm.lastStats.generatedTokens)) {
      throw new Error(`after the stop: ${kept.length} tokens kept, ${lm.lastStats.generatedTokens} counted`);
    }
    sameList(kept, ref.tiny.greedy.tokens.slice(0, kept.length), "tokens up to the stop");
    await rejects(() => lm.generate("x", { maxNewTokens: -1 }), "INVALID_ARGUMENT", /maxNewTokens/, "maxNewTokens -1");
    await rejects(() => lm.generate("x", { stop: [1] }), "INVALID_ARGUMENT", /stop/, "stop [1]");
    await rejects(() => lm.chatPrompt("hi"), "UNSUPPORTED", /chat template/, "chatPrompt");
  });

  await test("CausalLM.load errors: 404, garbage, truncated; use after free", async () => {
    await rejects(() => kiln.models.CausalLM.load(REF + "no-such.gguf", { cache: false }), "INVALID_ARGUMENT", /404/, "404");
    await rejects(() => kiln.models.CausalLM.load(new Uint8Array([1, 2, 3])), "INVALID_ARGUMENT", null, "garbage");
    await rejects(() => kiln.models.CausalLM.load(gguf.subarray(0, gguf.length - 100)), "INVALID_ARGUMENT", null, "truncated");
    await rejects(() => kiln.models.CausalLM.load(42), "INVALID_ARGUMENT", /URL string/, "a number");
    lm.free();
    await rejects(() => lm.generate("x"), "INVALID_ARGUMENT", /freed/, "generate after free");
    await rejects(() => lm.tokenize("x"), "INVALID_ARGUMENT", /freed/, "tokenize after free");
  });

  await test("in a Web Worker: the same tokens and the same embedding bits as the page", async () => {
    const worker = new Worker(new URL("./models-worker.js", import.meta.url), { type: "module" });
    const reply = new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => resolve(data);
      worker.onerror = (e) => reject(new Error(`worker: ${e.message}`));
    });
    const base = new URL(REF, import.meta.url).href;
    worker.postMessage({
      ggufUrl: base + "tiny-llama.gguf",
      folderUrl: base + "minilm",
      prompt: ref.tiny.prompt,
      maxNewTokens: ref.tiny.greedy.maxNewTokens,
      text: ref.sentences[0],
    });
    const r = await reply;
    worker.terminate();
    if (!r.ok) throw new Error(r.error);
    sameList(r.tokens, ref.tiny.greedy.tokens, "worker greedy tokens");
    if (r.pieces.join("") !== ref.tiny.greedy.text) throw new Error(`worker text ${JSON.stringify(r.pieces.join(""))}`);
    sameBits(r.embedding, new Uint32Array(alone.buffer), "worker embedding");
    return `adapter ${r.adapter}`;
  });

  log(`numbers: ${JSON.stringify(numbers)}`);
  return { ok: results.length > 0 && results.every(Boolean), adapter, numbers };
}
