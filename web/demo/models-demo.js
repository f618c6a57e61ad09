// The models demo: ranked sentences for a typed query (cosine similarity of normalised MiniLM
// embeddings, computed once for the sentences), and a chat box streaming a decoder's answer
// token by token, with load progress, the adapter and tokens/s.
import * as kiln from "../js/kiln.js";

const params = new URLSearchParams(location.search);
const EMBEDDER = params.get("embedder") ?? "../../build/models/all-MiniLM-L6-v2";
const LM = params.get("lm") ?? "../../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const SENTENCES = [
  "The giraffe is the tallest land animal.",
  "Elephants live in herds led by the oldest female.",
  "A safari park lets visitors watch lions from their cars.",
  "GPUs run thousands of threads at once.",
  "WebGPU brings compute shaders to the browser.",
  "Paris is the capital of France.",
  "Bread rises because yeast makes carbon dioxide.",
  "The Pacific is the largest ocean on Earth.",
];

const $ = (id) => document.getElementById(id);
const show = (bar, status) => (p) => {
  const frac = p.total ? p.loaded / p.total : 0;
  bar.value = frac;
  const amount = p.stage === "download" ? `${(p.loaded / 1e6).toFixed(1)}${p.total ? ` of ${(p.total / 1e6).toFixed(1)}` : ""} MB` : `${p.loaded}/${p.total}`;
  status.textContent = `${p.stage}: ${amount}`;
};

async function searchDemo() {
  const t0 = performance.now();
  const emb = await kiln.models.SentenceEmbedder.load(EMBEDDER, { onProgress: show($("emb-progress"), $("emb-status")) });
  const loadS = (performance.now() - t0) / 1000;
  $("emb-status").textContent = `embedding ${SENTENCES.length} sentences…`;
  const t1 = performance.now();
  const corpus = await emb.encode(SENTENCES, { normalize: true });
  const perS = SENTENCES.length / ((performance.now() - t1) / 1000);
  $("emb-progress").value = 1;
  $("emb-status").textContent = `loaded in ${loadS.toFixed(1)} s; ${perS.toFixed(1)} sentences/s; dimension ${emb.dimension}`;
  const d = emb.dimension;
  const search = async () => {
    const q = await emb.encode($("query").value, { normalize: true });
    const ranked = SENTENCES.map((s, i) => {
      let dot = 0;
      for (let j = 0; j < d; j++) dot += q[j] * corpus[i * d + j];
      return { s, score: dot };
    }).sort((a, b) => b.score - a.score);
    $("results").replaceChildren(
      ...ranked.map(({ s, score }) => {
        const row = document.createElement("div");
        row.className = "row";
        row.innerHTML = `<span class="score">${score.toFixed(3)}</span><span class="bar" style="width:${Math.max(0, score) * 8}em"></span>`;
        row.append(s);
        return row;
      }),
    );
    return ranked;
  };
  $("search").onsubmit = (e) => {
    e.preventDefault();
    search();
  };
  return search();
}

async function chatDemo() {
  $("lm-name").textContent = `(${LM.split("/").pop()})`;
  const t0 = performance.now();
  const lm = await kiln.models.CausalLM.load(LM, { onProgress: show($("lm-progress"), $("lm-status")) });
  $("lm-progress").value = 1;
  $("lm-status").textContent = `loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
  const maxNewTokens = Number(params.get("tokens") ?? 64);
  const ask = async () => {
    let prompt;
    try {
      prompt = lm.chatPrompt($("message").value);
    } catch {
      prompt = $("message").value; // a model without a chat template continues the text
    }
    $("answer").textContent = "";
    const t = performance.now();
    let n = 0;
    for await (const piece of lm.stream(prompt, { maxNewTokens, temperature: 0 })) {
      $("answer").textContent += piece;
      n++;
      $("speed").textContent = `${n} pieces, ${(n / ((performance.now() - t) / 1000)).toFixed(1)} pieces/s`;
    }
    const s = lm.lastStats;
    $("speed").textContent = `${s.generatedTokens} tokens; prefill ${s.prefillMs.toFixed(0)} ms; decode ${s.decodeTokensPerS.toFixed(1)} tokens/s`;
    return $("answer").textContent;
  };
  $("chat").onsubmit = (e) => {
    e.preventDefault();
    ask();
  };
  return ask();
}

try {
  const a = await kiln.init();
  $("adapter").textContent = `adapter: ${a.name || a.deviceType} (${a.backend}${a.shaderF16 ? ", shader-f16" : ""})`;
  const ranked = await searchDemo();
  const answer = await chatDemo();
  window.kilnResult = { ok: ranked.length === SENTENCES.length && answer.length > 0, adapter: a };
} catch (e) {
  $("adapter").textContent += ` — error: ${e.message}`;
  window.kilnResult = { ok: false, error: String(e) };
}
