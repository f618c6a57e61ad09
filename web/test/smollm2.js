// SmolLM2-135M-Instruct (Q4_1 GGUF) in the page: greedy tokens against llama.cpp's reference
// (models/tests/reference/smollm2/reference.json, the same one models/tests/smollm2.rs holds
// native Kiln to), a few tokens only: SwiftShader runs each of ~150 dispatches a token on the CPU.
// Part of `make web-test` (110-145 s here: a load from an empty cache 30-59 s, again from Cache
// Storage 25 s, a 5-token prefill 42-75 s, most of it the first compile of its pipelines, 2
// decode steps 16-22 s). It used to lose the device on its first
// generation: the 5-token prompt took the flash attention kernels, whose run makes SwiftShader's
// memory grow without bound until Chromium's GPU process dies (exit code 5 in Chromium's log); a
// KV-cache prefix on a CPU adapter now takes split-KV attention (kiln-core's attention.rs).
import * as kiln from "../js/kiln.js";
import { wasm } from "../js/core.js";

const GGUF = "../../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const REFERENCE = "../../models/tests/reference/smollm2/reference.json";
const NEW_TOKENS = 3;

export async function run(log) {
  const adapter = await kiln.init();
  const ref = (await (await fetch(REFERENCE)).json()).prompts.find((p) => p.name === "capital");
  // A hostile header through the page's GGUF stream: a KilnError at once (no abort of the
  // module, nothing of the claimed size allocated), not after a download.
  let sinkOk = false;
  const sink = new wasm.GgufSink();
  try {
    const head = new DataView(new ArrayBuffer(32));
    [0x47, 0x47, 0x55, 0x46].forEach((b, i) => head.setUint8(i, b));
    head.setUint32(4, 3, true);
    head.setBigUint64(16, 2n ** 62n, true); // metadata count
    sink.push(new Uint8Array(head.buffer));
  } catch (e) {
    sinkOk = e instanceof kiln.KilnError && e.codeName === "INVALID_ARGUMENT" && /header/.test(e.message);
  } finally {
    sink.free();
  }
  log(`${sinkOk ? "ok  " : "FAIL"} a GGUF header claiming 2^62 metadata entries: INVALID_ARGUMENT at once`);
  // From an empty Cache Storage (the download stored), then again from the cache: the model
  // checked below is the one the cache gave.
  await caches.delete(kiln.models.CACHE_NAME);
  const stages = {};
  let t0 = performance.now();
  const cold = await kiln.models.CausalLM.load(GGUF, {
    onProgress: (p) => (stages[p.stage] ??= ((performance.now() - t0) / 1000).toFixed(1)),
  });
  const loadS = (performance.now() - t0) / 1000;
  const { inUseBytes: gpuBytes, wasmHeapBytes } = kiln.memoryStats();
  log(
    `loaded in ${loadS.toFixed(1)} s from an empty cache (stages began at ${JSON.stringify(stages)} s), ` +
      `${gpuBytes} bytes on the GPU, wasm heap ${wasmHeapBytes} bytes (its peak)`,
  );
  // The file streams into GPU buffers (GgufStream), each piece written into its stack's buffer
  // as it arrives: wasm memory holds the header and a piece (22,282,240 bytes here; 49,938,432
  // when each stack was gathered whole first, the largest the 17.7 MB token embedding;
  // 150,536,192 when the 98 MB file went into it whole).
  const heapOk = wasmHeapBytes < 36e6;
  log(`${heapOk ? "ok  " : "FAIL"} wasm heap ${wasmHeapBytes} bytes after the load, under 36 MB (the file is 98 MB, its largest stack 17.7 MB)`);
  cold.free();
  // warmup: false: the cold load's warm-up compiled the pipelines (kept by the device after
  // free()); a second two-token pass would only add SwiftShader's ~10 s of forward time.
  t0 = performance.now();
  const lm = await kiln.models.CausalLM.load(GGUF, { warmup: false });
  const warmS = (performance.now() - t0) / 1000;
  const cached = (await (await caches.open(kiln.models.CACHE_NAME)).match(new URL(GGUF, location.href).href)) !== undefined;
  const cacheOk = cached && gpuBytes > 0;
  log(`${cacheOk ? "ok  " : "FAIL"} loaded again from Cache Storage in ${warmS.toFixed(1)} s, no warm-up (stored: ${cached})`);
  const ids = Array.from(lm.tokenize(ref.text));
  const idsOk = JSON.stringify(ids) === JSON.stringify(ref.ids);
  log(`${idsOk ? "ok  " : "FAIL"} tokenize ${JSON.stringify(ref.text)}: [${ids}] (llama.cpp [${ref.ids}])`);
  t0 = performance.now();
  const text = await lm.generate(ref.text, { maxNewTokens: NEW_TOKENS, temperature: 0, stopAtEos: false });
  const genS = (performance.now() - t0) / 1000;
  const got = Array.from(lm.lastTokens);
  const want = ref.greedy.slice(0, NEW_TOKENS);
  const tokOk = JSON.stringify(got) === JSON.stringify(want);
  log(`${tokOk ? "ok  " : "FAIL"} greedy ${NEW_TOKENS} tokens: [${got}] ${JSON.stringify(text)} (llama.cpp [${want}]) in ${genS.toFixed(1)} s, stats ${JSON.stringify(lm.lastStats)}`);
  const chat = lm.chatPrompt("Hi");
  const chatOk = chat.includes("<|im_start|>user\nHi<|im_end|>");
  log(`${chatOk ? "ok  " : "FAIL"} chatPrompt: ${JSON.stringify(chat)}`);
  lm.free();
  return { ok: sinkOk && heapOk && cacheOk && idsOk && tokOk && chatOk, adapter, numbers: { loadS, warmS, gpuBytes, wasmHeapBytes, genS, stats: lm.lastStats } };
}
