// Kiln in the browser: kiln-core on WebGPU. The module pages import:
//
//   import * as kiln from "./web/js/kiln.js";
//   await kiln.init();
//   const a = kiln.tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
//   const y = kiln.softmax(kiln.matmul(a, a), -1);
//   console.log(await y.toArray());
//
// Every op is kiln-core's, under the Python binding's name in camelCase (ops_gen.js, written by
// `kiln-gen` from the core's op table); every readback is a promise; every error a KilnError.
import initWasm from "../pkg/kiln_web.js";
import { KilnError, makeErrorClasses, wasm, withList } from "./core.js";
import { ERROR_CODES, OPS } from "./ops_gen.js";
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

// ---- the ops with their own signatures (the elementwise ones are in ops_gen.js) ----

export const zeros = (shape, dtype = "f32") => wasm.zeros(shape, dtype);
export const ones = (shape, dtype = "f32") => wasm.ones(shape, dtype);
export const full = (shape, value, dtype = "f32") => wasm.full(shape, dtype, value);
export const arange = (start, stop, step = 1, dtype = "f32") => wasm.arange(start, stop, step, dtype);
export const randomUniform = (shape, seed, low = 0, high = 1, dtype = "f32") =>
  wasm.randomUniform(shape, dtype, seed, low, high);
export const randomNormal = (shape, seed, mean = 0, std = 1, dtype = "f32") =>
  wasm.randomNormal(shape, dtype, seed, mean, std);
export const where = (cond, a, b) => wasm.where(cond, a, b);
export const astype = (x, dtype) => wasm.cast(x, dtype);
export const matmul = (a, b) => wasm.matmul(a, b);
const axesOf = (axes) => (axes === undefined || axes === null ? undefined : typeof axes === "number" ? [axes] : axes);
export const sum = (x, axes, keepdims = false) => wasm.sum(x, axesOf(axes), keepdims);
export const mean = (x, axes, keepdims = false) => wasm.mean(x, axesOf(axes), keepdims);
export const max = (x, axes, keepdims = false) => wasm.max(x, axesOf(axes), keepdims);
export const min = (x, axes, keepdims = false) => wasm.min(x, axesOf(axes), keepdims);
/** Whether every / any element is true (non-zero), over `axes` (all when absent): a bool tensor. */
export const all = (x, axes, keepdims = false) => wasm.all(x, axesOf(axes), keepdims);
export const any = (x, axes, keepdims = false) => wasm.any(x, axesOf(axes), keepdims);
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
export const var_ = (x, axes, keepdims = false, ddof = 0) => wasm.variance(x, axesOf(axes), keepdims, ddof);
export { var_ as var };
export const argmax = (x, axis, keepdims = false) => wasm.argmax(x, axis ?? undefined, keepdims);
export const argmin = (x, axis, keepdims = false) => wasm.argmin(x, axis ?? undefined, keepdims);
export const softmax = (x, axis = -1) => wasm.softmax(x, axis);
export const logSoftmax = (x, axis = -1) => wasm.logSoftmax(x, axis);
// The optional tensors are handed over as clones: a handle given to wasm by value is consumed.
const opt = (t) => (t === undefined || t === null ? undefined : t.clone());
export const layerNorm = (x, weight, bias, eps = 1e-5) => wasm.layerNorm(x, opt(weight), opt(bias), eps);
export const rmsNorm = (x, weight, eps = 1e-6) => wasm.rmsNorm(x, opt(weight), eps);
export const batchNorm = (x, mean, variance, weight, bias, eps = 1e-5) =>
  wasm.batchNorm(x, mean, variance, opt(weight), opt(bias), eps);
const pairOf = (v) => (v === undefined || v === null ? undefined : typeof v === "number" ? [v] : v);
export const conv2d = (x, w, bias, { stride, padding, dilation, groups } = {}) =>
  wasm.conv2d(x, w, opt(bias), pairOf(stride), pairOf(padding), pairOf(dilation), groups);
export const maxPool2d = (x, kernel, { stride, padding } = {}) =>
  wasm.maxPool2d(x, pairOf(kernel), pairOf(stride), pairOf(padding));
export const avgPool2d = (x, kernel, { stride, padding } = {}) =>
  wasm.avgPool2d(x, pairOf(kernel), pairOf(stride), pairOf(padding));
export const reshape = (x, shape) => wasm.reshape(x, shape);
export const permuteDims = (x, axes) => wasm.permute(x, axes);
/** Two axes swapped (kiln-core's transpose; numpy's swapaxes). */
export const swapaxes = (x, axis0, axis1) => wasm.transpose(x, axis0, axis1);
export const concat = (tensors, axis = 0) => withList(tensors, (list) => wasm.concatList(list, axis));
export const slice = (x, axis, start, stop, step = 1) => wasm.slice(x, axis, start, stop, step);
export const indexSelect = (x, axis, indices) => wasm.indexSelect(x, axis, indices);
export const gather = (x, axis, index) => wasm.gather(x, axis, index);
export const embedding = (weight, ids) => wasm.embedding(weight, ids);
export const rope = (x, posOffset = 0, base = 10000) => wasm.rope(x, posOffset, base);
export const attention = (q, k, v, { causal = false, scale } = {}) => wasm.attention(q, k, v, causal, scale ?? undefined);
export const quantFromBytes = (bytes, format, rows, cols) => wasm.quantFromBytes(bytes, format, rows, cols);
/** Resolves to the quantized tensor (the quantizer runs on the host, after an awaited readback). */
export const quantize = (x, format) => wasm.quantize(x, format);
export const dequantize = (w, format, rows, cols) => wasm.dequantize(w, format, rows, cols);
export const quantMatmul = (x, w, format, n) => wasm.quantMatmul(x, w, format, n);
export const quantEmbedding = (w, format, d, ids) => wasm.quantEmbedding(w, format, d, ids);


// ---- reductions, scans and linear algebra of the Array API ----

/** Product over `axes` (all when absent), in `dtype` (default: x's). */
export const prod = (x, axes, keepdims = false, dtype) => wasm.prod(x, axesOf(axes), keepdims, dtype ?? undefined);
export const std = (x, axes, keepdims = false, ddof = 0) => wasm.std(x, axesOf(axes), keepdims, ddof);
/** Cumulative sum along `axis` (optional for 1-D x), in `dtype`, with a leading 0 when `includeInitial`. */
export const cumulativeSum = (x, { axis, dtype, includeInitial = false } = {}) =>
  wasm.cumulativeSum(x, axis ?? undefined, dtype ?? undefined, includeInitial);
/** Cumulative product along `axis`, as cumulativeSum (a leading 1 when `includeInitial`). */
export const cumulativeProd = (x, { axis, dtype, includeInitial = false } = {}) =>
  wasm.cumulativeProd(x, axis ?? undefined, dtype ?? undefined, includeInitial);
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
export const vecdot = (x1, x2, axis = -1) => wasm.vecdot(x1, x2, axis);
/** Contracts the last `axes` axes of x1 with the first of x2, or the axes paired by `[axes1, axes2]`. */
export const tensordot = (x1, x2, axes = 2) =>
  typeof axes === "number" ? wasm.tensordot(x1, x2, axes, undefined, undefined) : wasm.tensordot(x1, x2, undefined, axes[0], axes[1]);

// ---- searching, sorting and sets ----

export const sort = (x, { axis = -1, descending = false } = {}) => wasm.sort(x, axis, descending);
export const argsort = (x, { axis = -1, descending = false } = {}) => wasm.argsort(x, axis, descending);
/** For each element of x2, the i32 index at which it goes into the sorted 1-D x1 ("left": before equal elements). */
export const searchsorted = (x1, x2, { side = "left" } = {}) => {
  if (side !== "left" && side !== "right") throw new errors.INVALID_ARGUMENT(`searchsorted: side must be "left" or "right", got ${side}`);
  return wasm.searchsorted(x1, x2, side === "right");
};
export const countNonzero = (x, axes, keepdims = false) => wasm.countNonzero(x, axesOf(axes), keepdims);
/** Whether each element of x1 equals an element of x2 (bool; with `invert`, equals none). NaN is never found. */
export const isin = (x1, x2, { invert = false } = {}) => wasm.isin(x1, x2, invert);
// nonzero and unique_* size their outputs by data read back from the GPU: they resolve.
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
