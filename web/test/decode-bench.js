// Decode tokens/s in the page, the pipelined loop (lookahead 8, the default) against one token
// at a time (lookahead 0: each id read back before the next token is recorded): BENCHMARKS.md's
// numbers (`scripts/web-test.py decode-bench`; not part of `make web-test`). Runs alternate
// between the two so that the shared machine's load falls on both alike; each run's tokens are
// checked equal to the first's (greedy: the loops must agree).
// ?tiny=N tokens of the tiny random decoder (default 64, 0 skips it; needs
// build/web/models-reference: make web-models-reference), ?smollm2=N of SmolLM2 (default 0:
// ~10 s a token on SwiftShader), ?rounds=R (default 3).
import * as kiln from "../js/kiln.js";

const TINY = "../../build/web/models-reference/tiny-llama.gguf";
const SMOLLM2 = "../../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

async function measure(log, name, url, prompt, tokens, rounds) {
  const lm = await kiln.models.CausalLM.load(url, { cache: false });
  const rates = { 0: [], 8: [] };
  let want = null;
  let same = true;
  try {
    for (let r = 0; r < rounds; r++) {
      for (const lookahead of [0, 8]) {
        await lm.generate(prompt, { maxNewTokens: tokens, stopAtEos: false, lookahead });
        const got = JSON.stringify(Array.from(lm.lastTokens));
        want ??= got;
        same &&= got === want;
        rates[lookahead].push(lm.lastStats.decodeTokensPerS);
        const st = lm.lastStats;
        log(`${name} round ${r + 1}, lookahead ${lookahead}: ${st.decodeTokensPerS.toFixed(3)} tokens/s decode (${tokens} tokens), first token ${(st.prefillMs / 1000).toFixed(1)} s`);
      }
    }
  } finally {
    lm.free();
  }
  // The middle run (of an even count, the mean of the middle two).
  const median = (a) => {
    const s = [...a].sort((x, y) => x - y);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  };
  const serial = median(rates[0]);
  const pipelined = median(rates[8]);
  log(`${same ? "ok  " : "FAIL"} ${name}: median ${serial.toFixed(3)} tokens/s serial, ${pipelined.toFixed(3)} pipelined (${(pipelined / serial).toFixed(2)}x); the same tokens in every run: ${same}`);
  return { same, serial, pipelined, rates };
}

export async function run(log) {
  const adapter = await kiln.init();
  const q = new URLSearchParams(location.search);
  const tiny = Number(q.get("tiny") ?? 64);
  const smollm2 = Number(q.get("smollm2") ?? 0);
  const rounds = Number(q.get("rounds") ?? 3);
  const numbers = {};
  if (tiny > 0) numbers.tiny = await measure(log, "tiny decoder", TINY, "Kiln:hello", tiny, rounds);
  if (smollm2 > 0) numbers.smollm2 = await measure(log, "SmolLM2-135M Q4_1", SMOLLM2, "The capital of France is", smollm2, rounds);
  return { ok: Object.values(numbers).every((n) => n.same), adapter, numbers };
}
