// Kiln in the browser: kiln-core on WebGPU. The module pages import:
//
//   import * as kiln from "./web/js/kiln.js";
//   await kiln.init();
//   const a = kiln.tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
//   const y = kiln.softmax(kiln.matmul(a, a), -1);
//   console.log(await y.toArray());
//
// Every op is kiln-core's, under the Python binding's name in camelCase: ops_gen.js's (written
// by `kiln-gen` from the core's op table: the elementwise and plain ops) and the few below whose
// JavaScript form differs; every readback is a promise; every error a KilnError.
import initWasm from "../pkg/kiln_web.js";
import { KilnError, makeErrorClasses, wasm, withList } from "./core.js";
import { ERROR_CODES, OPS, full } from "./ops_gen.js";
import { makeModels } from "./models.js";

export * from "./ops_gen.js";
export { KilnError };

/** The KilnError subclass of each status, by name: `kiln.errors.SHAPE_MISMATCH`. */
export const errors = makeErrorClasses(ERROR_CODES);

function makeError(code, codeName, message) {
  const C = errors[codeName];
  return C ? new C(message) : new KilnError(message, code, codeName);
}

/**
 * Models on the page's device: `kiln.models.SentenceEmbedder.load(folderUrl, {dtype, onProgress})`
 * and `kiln.models.CausalLM.load(ggufUrlOrBytes, {onProgress})` (js/models.js).
 */
export const models = makeModels(errors);

let ready = null;

/**
 * Loads the wasm module, finds the WebGPU adapter and opens the device; resolves to the
 * adapter's description. Call (and await) it first; later calls return the same promise.
 * `options.wasm`: where kiln_web_bg.wasm is (default: next to kiln_web.js).
 */
export function init(options = {}) {
  ready ??= (async () => {
    if (typeof navigator === "undefined" || !navigator.gpu) {
      throw new errors.NO_ADAPTER(
        "WebGPU is not available here (navigator.gpu is missing): use a browser with WebGPU, " +
          "in a secure context (https or localhost); Chromium on Linux needs --enable-unsafe-webgpu",
      );
    }
    await initWasm(options.wasm ? { module_or_path: options.wasm } : undefined);
    wasm.setErrorFactory(makeError);
    return wasm.init();
  })().catch((e) => {
    ready = null;
    throw e;
  });
  return ready;
}

export const Tensor = wasm.Tensor;
export const TensorList = wasm.TensorList;
export const Kernel = wasm.Kernel;
/**
 * A session: tensors and kernels created while it is current belong to it and count against
 * its limits (`new Session({maxBytes, maxOpsTotal, ...})`). It is current only inside
 * `session.run(fn)` (fn synchronous) or between `enter()` and `exit()` with no `await` between:
 * the page's one thread runs every task, so a session left current across an `await` would be
 * charged for other tasks' work. `compileKernel` is the asynchronous creation in a session.
 */
export const Session = wasm.Session;

/** Binds `tensors` in binding order and queues `workgroups` ([x, y, z] or a number). */
Kernel.prototype.dispatch = function dispatch(tensors, workgroups, uniforms) {
  const [x, y = 1, z = 1] = typeof workgroups === "number" ? [workgroups] : workgroups;
  withList(tensors, (list) => this.dispatchList(list, x, y, z, uniforms ?? undefined));
};

if (typeof Symbol.dispose === "symbol") {
  Tensor.prototype[Symbol.dispose] = Tensor.prototype.free;
  Kernel.prototype[Symbol.dispose] = Kernel.prototype.free;
  Session.prototype[Symbol.dispose] = Session.prototype.free;
}

/**
 * A tensor holding a typed array: Float32Array (f32), Int32Array (i32), Uint32Array (u32), Uint8Array (bool, 0/1) or
 * Uint16Array (f16 bits, dtype "f16"). `shape` defaults to `[data.length]`.
 */
export function tensor(data, shape, dtype) {
  return wasm.Tensor.fromArray(data, shape ?? undefined, dtype ?? undefined);
}

/** A tensor from little-endian bytes (a Uint8Array of exactly the shape's size). */
export function fromBytes(bytes, shape, dtype) {
  return wasm.Tensor.fromBytes(bytes, shape, dtype);
}

export const adapterInfo = () => wasm.adapterInfo();
export const hasF16 = () => wasm.hasF16();
export const synchronize = () => wasm.synchronize();
export const memoryStats = () => wasm.memoryStats();

// ---- the ops whose JavaScript form kiln.js writes by hand (the plain ops and the elementwise
// ones are ops_gen.js's, generated from kiln-core's op table): a bound or an edge that may be a
// number, numpy's spellings (searchsorted's side, tensordot's axes), a host byte array, and the
// promises of the ops that wait for a readback (their sizes or values come from the GPU) ----

/**
 * `x` limited to [min, max]: numbers or tensors (broadcast to x), either may be omitted; a NaN in
 * x or a bound gives NaN.
 */
export const clip = (x, min, max) => {
  const isNum = (b) => b === undefined || b === null || typeof b === "number";
  if (isNum(min) && isNum(max)) return wasm.clipScalar(x, min ?? -Infinity, max ?? Infinity);
  const t = (b) => (b === undefined || b === null ? undefined : typeof b === "number" ? full([1], b, x.dtype) : b.clone());
  return wasm.clip(x, t(min), t(max));
};
/**
 * The `n`-th forward difference along `axis`; `prepend` / `append` (tensors of x's shape but
 * for the axis, or numbers: one element along the axis) are joined at either end first.
 */
export const diff = (x, { axis = -1, n = 1, prepend, append } = {}) => {
  const edge = (v) => {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number") return v.clone();
    const shape = Array.from(x.shape);
    if (shape.length) shape[axis < 0 ? axis + shape.length : axis] = 1;
    return full(shape, v, x.dtype);
  };
  return wasm.diff(x, axis, n, edge(prepend), edge(append));
};
/** Contracts the last `axes` axes of x1 with the first of x2, or the axes paired by `[axes1, axes2]`. */
export const tensordot = (x1, x2, axes = 2) =>
  typeof axes === "number" ? wasm.tensordot(x1, x2, axes, undefined, undefined) : wasm.tensordot(x1, x2, undefined, axes[0], axes[1]);
/** For each element of x2, the i32 index at which it goes into the sorted 1-D x1 ("left": before equal elements). */
export const searchsorted = (x1, x2, { side = "left" } = {}) => {
  if (side !== "left" && side !== "right") throw new errors.INVALID_ARGUMENT(`searchsorted: side must be "left" or "right", got ${side}`);
  return wasm.searchsorted(x1, x2, side === "right");
};
export const quantFromBytes = (bytes, format, rows, cols) => wasm.quantFromBytes(bytes, format, rows, cols);
/** Resolves to one i32 tensor of coordinates per dimension of x. */
export const nonzero = (x) => wasm.nonzero(x);
/** Resolves to `{values, indices, inverse_indices, counts}` (the Array API's names). */
export const uniqueAll = async (x) => {
  const [values, indices, inverse_indices, counts] = await wasm.uniqueAll(x);
  return { values, indices, inverse_indices, counts };
};
/** Resolves to `{values, counts}`. */
export const uniqueCounts = async (x) => {
  const [values, indices, inverse, counts] = await wasm.uniqueAll(x);
  indices.free();
  inverse.free();
  return { values, counts };
};
/** Resolves to `{values, inverse_indices}` (x's shape). */
export const uniqueInverse = async (x) => {
  const [values, indices, inverse_indices, counts] = await wasm.uniqueAll(x);
  indices.free();
  counts.free();
  return { values, inverse_indices };
};
/** Resolves to the distinct values, sorted (each NaN kept). */
export const uniqueValues = async (x) => {
  const [values, ...rest] = await wasm.uniqueAll(x);
  rest.forEach((t) => t.free());
  return values;
};

/** The JavaScript function of each op of kiln-core's table (a missing one is a bug: the tests check). */
export function opFunctions(module) {
  return Object.fromEntries(OPS.map((o) => [o.name, module[o.js]]));
}
