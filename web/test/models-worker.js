// kiln.models inside a Web Worker (a module worker: WebGPU, fetch and Cache Storage are there,
// the DOM is not). web/test/models.js starts it and checks what it posts back.
import * as kiln from "../js/kiln.js";

self.onmessage = async ({ data }) => {
  try {
    const adapter = await kiln.init();
    const lm = await kiln.models.CausalLM.load(data.ggufUrl, { warmup: false });
    const pieces = [];
    for await (const p of lm.stream(data.prompt, { maxNewTokens: data.maxNewTokens, stopAtEos: false })) pieces.push(p);
    const tokens = Array.from(lm.lastTokens);
    lm.free();
    const emb = await kiln.models.SentenceEmbedder.load(data.folderUrl, { warmup: false });
    const embedding = await emb.encode(data.text);
    emb.free();
    self.postMessage({ ok: true, adapter: adapter.deviceType, pieces, tokens, embedding });
  } catch (e) {
    self.postMessage({ ok: false, error: `${e?.name}: ${e?.message}\n${e?.stack ?? ""}` });
  }
};
