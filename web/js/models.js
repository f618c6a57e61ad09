// kiln.models in the page: SentenceEmbedder and CausalLM (kiln-models on wasm32: the same
// loaders and forward passes as native Kiln, on the page's WebGPU device). This file does
// what a page needs around them: fetching a model (with progress and Cache Storage), turning
// the user's values into the core's, async iteration that yields between tokens, and
// use-after-free as a KilnError. kiln.js exports it as `kiln.models`.
import { wasm } from "./core.js";

/** Cache Storage bucket for model files (a reload does not download them again). */
export const CACHE_NAME = "kiln-models-v1";

/** The files of a sentence-transformers folder the loader reads; modules.json may be absent. */
const EMBEDDER_FILES = ["config.json", "sentence_bert_config.json", "1_Pooling/config.json", "tokenizer.json", "model.safetensors"];
const OPTIONAL_FILES = ["modules.json"];

/** Resolves on the next turn of the event loop (a MessageChannel task: no 4 ms timer clamp). */
function nextTask() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      resolve();
    };
    ch.port2.postMessage(0);
  });
}

export function makeModels(errors) {
  const invalid = (msg) => new errors.INVALID_ARGUMENT(msg);

  /** The bytes of what a user would pass: ArrayBuffer, any typed array or DataView (its bytes). */
  function asBytes(x, what) {
    if (x instanceof Uint8Array) return x;
    if (x instanceof ArrayBuffer) return new Uint8Array(x);
    if (ArrayBuffer.isView(x)) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    throw invalid(`${what}: expected a URL string, an ArrayBuffer or a typed array, got ${Object.prototype.toString.call(x)}`);
  }

  const report = (onProgress, stage, loaded, total) => {
    if (typeof onProgress === "function") {
      try {
        onProgress({ stage, loaded, total });
      } catch {
        // A progress bar's error must not fail the load.
      }
    }
  };

  /**
   * The response for `url`: from Cache Storage when there (and `cache` is not false), else
   * fetched. A 404 is `null` when `optional`, else a KilnError naming the URL.
   */
  async function open(url, { cache = true, optional = false } = {}) {
    const store = cache !== false && typeof caches !== "undefined" ? await caches.open(CACHE_NAME).catch(() => null) : null;
    const cached = store ? await store.match(url) : undefined;
    if (cached) return { url, response: cached, store: null };
    let response;
    try {
      response = await fetch(url);
    } catch (e) {
      throw invalid(`cannot fetch ${url}: ${e?.message ?? e}`);
    }
    if (response.status === 404 && optional) return null;
    if (!response.ok) throw invalid(`cannot fetch ${url}: HTTP ${response.status} ${response.statusText}`);
    return { url, response, store };
  }

  /** Its size in bytes when the server said (0: unknown). */
  const sizeOf = (opened) => Number(opened?.response.headers.get("content-length")) || 0;

  /**
   * The body of an `open`ed response, `onBytes(n)` called as each chunk arrives; stored in the
   * cache once whole (a truncated download is an error and is not stored). With `sink` (a
   * wasm GgufSink or SafetensorsSink) each chunk goes straight to the model's stream loader and
   * the sink is returned: no whole-file array is joined in JavaScript.
   */
  async function read(opened, onBytes, sink = null) {
    const { url, response, store } = opened;
    const total = sizeOf(opened);
    const chunks = [];
    let loaded = 0;
    const reader = (store ? response.clone() : response).body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (sink) sink.push(value);
      else chunks.push(value);
      loaded += value.length;
      onBytes(value.length);
    }
    if (total && loaded !== total) throw invalid(`${url}: ${loaded} of ${total} bytes arrived (a truncated download)`);
    if (store) await store.put(url, response).catch(() => {});
    if (sink) return sink;
    if (chunks.length === 1) return chunks[0];
    const bytes = new Uint8Array(loaded);
    let at = 0;
    for (const c of chunks) {
      bytes.set(c, at);
      at += c.length;
    }
    return bytes;
  }

  /**
   * Downloads `urls` (null entries of `optional` 404s), "download" progress over all of them;
   * `sinks[url]` (a wasm sink) takes that file's chunks as they arrive.
   */
  async function download(urls, { cache, onProgress, optional = () => false, sinks = {} }) {
    const opened = await Promise.all(urls.map((u) => open(u, { cache, optional: optional(u) })));
    const total = opened.reduce((t, o) => t + sizeOf(o), 0);
    let loaded = 0;
    report(onProgress, "download", 0, total);
    return Promise.all(
      opened.map((o, i) =>
        o
          ? read(
              o,
              (n) => {
                loaded += n;
                report(onProgress, "download", loaded, total);
              },
              sinks[urls[i]] ?? null,
            )
          : null,
      ),
    );
  }

  /** A folder URL with one trailing slash, resolved against the page. */
  function folderUrl(url) {
    const s = String(url);
    return new URL(s.endsWith("/") ? s : s + "/", globalThis.location?.href).href;
  }

  /** A model's lifetime: `use()` throws a KilnError after `free()`; free waits for work in flight. */
  class Handle {
    constructor(core, what) {
      this.core = core;
      this.what = what;
      this.busy = 0;
      this.freeing = false;
    }
    use() {
      if (!this.core || this.freeing) throw invalid(`this ${this.what} was freed (free() was called)`);
      return this.core;
    }
    async run(f) {
      const core = this.use();
      this.busy++;
      try {
        return await f(core);
      } finally {
        this.busy--;
        if (this.freeing && this.busy === 0) this.release();
      }
    }
    free() {
      if (!this.core) return;
      this.freeing = true;
      if (this.busy === 0) this.release();
    }
    release() {
      this.core?.free();
      this.core = null;
    }
  }

  class SentenceEmbedder {
    #h;
    constructor(core) {
      this.#h = new Handle(core, "SentenceEmbedder");
      this.dimension = core.dimension;
      this.maxSeqLength = core.maxSeqLength;
      this.normalizes = core.normalizes;
      this.dtype = core.dtype;
    }

    /**
     * A sentence-transformers folder: its URL (config.json, tokenizer.json, modules.json,
     * model.safetensors, sentence_bert_config.json, 1_Pooling/config.json under it), or its
     * files as `{name: bytes}`. Options: `dtype` ("f32" default, "f16" needs shader-f16),
     * `onProgress({stage, loaded, total})` for "download" (bytes), "upload" (layers) and
     * "compile" (a warm-up pass that builds the pipelines), `cache` (false: no Cache Storage),
     * `warmup` (false: pipelines compile on the first encode).
     */
    static async load(source, { dtype = "f32", onProgress, cache = true, warmup = true } = {}) {
      const names = [];
      const contents = [];
      const upload = (done, total) => report(onProgress, "upload", done, total);
      let core;
      if (typeof source === "string" || source instanceof URL) {
        const base = folderUrl(source);
        // model.safetensors streams into the GPU as it downloads (tensor by tensor: wasm
        // memory holds one tensor's bytes at a time, not the file); the small files are read whole.
        const weightsUrl = base + "model.safetensors";
        const all = [...EMBEDDER_FILES, ...OPTIONAL_FILES];
        const optional = (u) => OPTIONAL_FILES.some((n) => base + n === u);
        const sink = new wasm.SafetensorsSink();
        try {
          const got = await download(
            all.map((n) => base + n),
            { cache, onProgress, optional, sinks: { [weightsUrl]: sink } },
          );
          all.forEach((n, i) => {
            if (got[i] && got[i] !== sink) {
              names.push(n);
              contents.push(got[i]);
            }
          });
          core = wasm.SentenceEmbedderCore.fromFilesStreamed(names, contents, String(dtype), upload, sink);
        } finally {
          sink.free();
        }
      } else if (source && typeof source === "object") {
        for (const [n, b] of Object.entries(source)) {
          names.push(n);
          contents.push(asBytes(b, `file ${n}`));
        }
        core = wasm.SentenceEmbedderCore.fromFiles(names, contents, String(dtype), upload);
      } else {
        throw invalid("SentenceEmbedder.load(source): source is a folder URL or an object of {fileName: bytes}");
      }
      const model = new SentenceEmbedder(core);
      if (warmup) {
        report(onProgress, "compile", 0, 1);
        await core.encode(["kiln"], undefined, 1);
        report(onProgress, "compile", 1, 1);
      }
      return model;
    }

    /**
     * Embeddings of `texts` (a string or an array of strings) as a Float32Array, row-major
     * [texts.length, dimension]. `normalize` (default: the model's Normalize module), `batchSize`
     * (default 32).
     */
    async encode(texts, { normalize, batchSize = 32 } = {}) {
      const list = typeof texts === "string" ? [texts] : Array.from(texts ?? []);
      list.forEach((t, i) => {
        if (typeof t !== "string") throw invalid(`encode: text ${i} is ${typeof t}, expected a string`);
      });
      if (!(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 2 ** 32 - 1)) {
        throw invalid(`encode: batchSize must be a whole number from 1, got ${batchSize}`);
      }
      if (normalize !== undefined && typeof normalize !== "boolean") throw invalid("encode: normalize is true or false");
      return this.#h.run((core) => core.encode(list, normalize, batchSize));
    }

    /** Token ids of `text` ([CLS] ... [SEP]). */
    tokenize(text) {
      return this.#h.use().tokenize(String(text));
    }

    /** Frees the GPU memory now (after any encode in flight); later calls throw a KilnError. */
    free() {
      this.#h.free();
    }
  }

  class CausalLM {
    #h;
    /** The last generation's `{promptTokens, generatedTokens, prefillMs, decodeMs, decodeTokensPerS}`. */
    lastStats = null;
    constructor(core) {
      this.#h = new Handle(core, "CausalLM");
      this.vocabSize = core.vocabSize;
      this.contextLength = core.contextLength;
    }

    /**
     * A Llama-architecture GGUF (SmolLM2, ...): its URL or its bytes. Options: `onProgress`
     * ("download", "upload" by layers, "compile": a two-token warm-up), `cache`, `warmup`.
     */
    static async load(source, { onProgress, cache = true, warmup = true } = {}) {
      const upload = (done, total) => report(onProgress, "upload", done, total);
      let core;
      if (typeof source === "string" || source instanceof URL) {
        // The file streams into GPU buffers as it arrives (kiln-models' GgufStream: the header,
        // then each weight stack uploaded when its last tensor is in): wasm memory holds the
        // header and the stack being gathered, never the file.
        const url = new URL(String(source), globalThis.location?.href).href;
        const opened = await open(url, { cache });
        const total = sizeOf(opened);
        report(onProgress, "download", 0, total);
        let loaded = 0;
        const sink = new wasm.GgufSink();
        try {
          await read(opened, (n) => report(onProgress, "download", (loaded += n), total), sink);
          core = wasm.CausalLMCore.fromSink(sink, upload);
        } finally {
          sink.free();
        }
      } else {
        core = wasm.CausalLMCore.fromBytes(asBytes(source, "CausalLM.load(source)"), upload);
      }
      const model = new CausalLM(core);
      if (warmup) {
        report(onProgress, "compile", 0, 1);
        const g = core.start("Hi!", { maxNewTokens: 2, stopAtEos: false });
        try {
          while ((await g.next()) !== undefined);
        } finally {
          g.free();
        }
        report(onProgress, "compile", 1, 1);
      }
      return model;
    }

    /**
     * Text pieces of the continuation of `prompt`, as they come: an async iterator that yields
     * to the event loop between tokens. Options: `maxNewTokens` (128), `temperature` (0: greedy),
     * `topK`, `topP`, `repetitionPenalty`, `repeatLastN`, `seed`, `stop` (a string or strings),
     * `stopAtEos` (true), `lookahead` (tokens recorded ahead of the last one read back: 8; 0
     * reads each token back before recording the next).
     */
    async *stream(prompt, options = {}) {
      if (typeof prompt !== "string") throw invalid(`prompt is ${typeof prompt}, expected a string`);
      const h = this.#h;
      const core = h.use();
      const g = core.start(prompt, options ?? {});
      h.busy++;
      try {
        for (;;) {
          const piece = await g.next();
          this.lastStats = g.stats();
          this.lastTokens = g.tokens;
          if (piece === undefined) return;
          yield piece;
          await nextTask();
        }
      } finally {
        g.free();
        h.busy--;
        if (h.freeing && h.busy === 0) h.release();
      }
    }

    /** The whole continuation of `prompt` (options as `stream`). */
    async generate(prompt, options = {}) {
      let text = "";
      for await (const piece of this.stream(prompt, options)) text += piece;
      return text;
    }

    /** `userText` through the model's chat template (a KilnError UNSUPPORTED without one). */
    chatPrompt(userText) {
      return this.#h.use().chatPrompt(String(userText));
    }

    /** Token ids of `text` (Uint32Array). */
    tokenize(text) {
      return this.#h.use().tokenize(String(text));
    }

    /** The text of token ids (a plain array or typed array of whole numbers). */
    detokenize(ids) {
      const a = Array.from(ids ?? [], (x) => {
        const n = Number(x);
        if (!Number.isInteger(n) || n < 0 || n > 2 ** 32 - 1) throw invalid(`detokenize: ${x} is not a token id`);
        return n;
      });
      return this.#h.use().detokenize(new Uint32Array(a));
    }

    /** Frees the weights now (after any generation in flight); later calls throw a KilnError. */
    free() {
      this.#h.free();
    }
  }

  return { SentenceEmbedder, CausalLM, CACHE_NAME };
}
