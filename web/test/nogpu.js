// A page without WebGPU: init must reject with a KilnError NO_ADAPTER that says what to do.
export async function run(log) {
  Object.defineProperty(Navigator.prototype, "gpu", { get: () => undefined, configurable: true });
  const kiln = await import("../js/kiln.js");
  try {
    await kiln.init();
  } catch (e) {
    const ok = e instanceof kiln.KilnError && e instanceof kiln.errors.NO_ADAPTER && e.code === 9 && /WebGPU/.test(e.message);
    log(`${ok ? "ok  " : "FAIL"} init without WebGPU: ${e.name} (${e.code}): ${e.message}`);
    return { ok };
  }
  log("FAIL init without WebGPU resolved");
  return { ok: false };
}
