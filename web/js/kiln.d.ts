// Types of kiln.js (Kiln in the browser). The declarations of the elementwise and plain ops
// between the markers are written by `kiln-gen` from kiln-core's op table (their doc lines are
// the rows'); the ops above them have a JavaScript form of their own (kiln.js writes them).

export type DType = "f32" | "f16" | "i32" | "u32" | "bool";
export type TypedArray = Float32Array | Int32Array | Uint32Array | Uint16Array | Uint8Array;
export type Operand = Tensor | number;
export type Pair = number | [number] | [number, number];
/** Axes to reduce: one, several, or null (every axis). */
export type Axes = number | number[] | null;

export interface AdapterInfo {
  name: string;
  backend: string;
  deviceType: string;
  driver: string;
  vendor: number;
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  maxComputeWorkgroupsPerDimension: number;
  shaderF16: boolean;
  timestampQuery: boolean;
  subgroups: boolean;
}

/** A Kiln error: `code` is the stable status number shared by every binding, `codeName` its name. */
export class KilnError extends Error {
  readonly code: number;
  readonly codeName: string;
}
/** The subclass of each status by name, e.g. `errors.SHAPE_MISMATCH` (class ShapeMismatchError). */
export const errors: Record<string, typeof KilnError>;

export class Tensor {
  static fromArray(data: TypedArray, shape?: number[], dtype?: DType): Tensor;
  static fromBytes(bytes: Uint8Array, shape: number[], dtype: DType): Tensor;
  readonly shape: Uint32Array;
  readonly dtype: DType;
  readonly ndim: number;
  readonly numel: number;
  readonly nbytes: number;
  /** The elements as a typed array of the dtype (f16: Uint16Array of bits). */
  toArray(): Promise<TypedArray>;
  toBytes(): Promise<Uint8Array>;
  reshape(shape: number[]): Tensor;
  /** Another handle on the same GPU buffer. */
  clone(): Tensor;
  /** Gives the GPU memory back now (a finalizer does it for tensors that are only dropped). */
  free(): void;
  dispose(): void;
}

export class Kernel {
  /** Compiles and validates `source` (naga: line:column errors); the browser's own compiler
   *  may still refuse it, reported by the next awaited call: prefer `Kernel.compile`. */
  constructor(source: string, entry?: string);
  /** Resolves once the browser's compiler has accepted the kernel too. */
  static compile(source: string, entry?: string): Promise<Kernel>;
  readonly entry: string;
  readonly workgroupSize: Uint32Array;
  readonly storageBindings: number;
  dispatch(tensors: Tensor[], workgroups: number | [number, number?, number?], uniforms?: Uint8Array | null): void;
  free(): void;
}

/** Limits of a session; every field optional (0 or absent: no limit; the allow* flags default to true). */
export interface SessionLimits {
  /** Bytes the session's live tensors may hold at once (size classes): over it, QUOTA_EXCEEDED. */
  maxBytes?: number;
  /** Operations (workgroups × invocations per workgroup) per dispatch and in all: over them, COMPUTE_LIMIT. */
  maxOpsPerDispatch?: number;
  maxOpsTotal?: number;
  /** Loop iterations one invocation of the session's kernels may run (0: about 4 billion). */
  maxLoopIterations?: number;
  /** Kernels the session may hold at once (QUOTA_EXCEEDED past it); each live kernel also
   *  counts a fixed charge against maxBytes. */
  maxKernels?: number;
  maxSourceBytes?: number;
  maxWorkgroupInvocations?: number;
  maxBindings?: number;
  allowF16?: boolean;
  allowAtomics?: boolean;
  allowWorkgroupMemory?: boolean;
  allowSubgroups?: boolean;
}

export interface SessionStats {
  id: number;
  bytesInUse: number;
  peakBytes: number;
  liveBuffers: number;
  opsTotal: number;
  dispatches: number;
  kernelsCompiled: number;
  quotaExceeded: number;
  computeLimitHits: number;
  policyRejections: number;
  closed: boolean;
}

/**
 * A session with limits. Current only while synchronous code runs: inside `run(fn)`, or between
 * `enter()` and `exit()` with no `await` between (the page's other tasks would run in it).
 * `close()` (or `free()`, or garbage collection) frees everything it owns.
 */
export class Session {
  constructor(limits?: SessionLimits);
  readonly id: number;
  readonly closed: boolean;
  /** Calls `f` with the session current; `f` must be synchronous (a returned promise is refused). */
  run<T>(f: () => T): T;
  enter(): void;
  exit(): void;
  /** Compiles a kernel owned by the session (bounded loops, its shader policy). */
  compileKernel(source: string, entry?: string): Promise<Kernel>;
  close(): void;
  stats(): SessionStats;
  free(): void;
}

export function init(options?: { wasm?: string | URL }): Promise<AdapterInfo>;
export function adapterInfo(): AdapterInfo;
export function hasF16(): boolean;
export function synchronize(): Promise<void>;
export function memoryStats(): {
  allocatedBytes: number;
  inUseBytes: number;
  peakBytes: number;
  liveBuffers: number;
  pooledBytes: number;
  /** The wasm heap's size in bytes: it only grows, so this is its peak so far. */
  wasmHeapBytes: number;
};
export function tensor(data: TypedArray, shape?: number[], dtype?: DType): Tensor;
export function fromBytes(bytes: Uint8Array, shape: number[], dtype: DType): Tensor;

export const ERROR_CODES: [number, string][];
export const OPS: { name: string; js: string; family: string }[];
export function opFunctions(module: object): Record<string, Function | undefined>;

/** `x` limited to [min, max]; a bound may be a number, a tensor broadcast to x, or omitted. */
export function clip(x: Tensor, min?: number | Tensor | null, max?: number | Tensor | null): Tensor;
export function quantFromBytes(bytes: Uint8Array, format: string, rows: number, cols: number): Tensor;
/** The `n`-th forward difference along `axis`; a number for `prepend` / `append` is one element along it. */
export function diff(
  x: Tensor,
  options?: { axis?: number; n?: number; prepend?: Tensor | number | null; append?: Tensor | number | null },
): Tensor;
/** Contracts the last `axes` axes of x1 with the first of x2, or the axes paired by `[axes1, axes2]`. */
export function tensordot(x1: Tensor, x2: Tensor, axes?: number | [number[], number[]]): Tensor;
/** For each element of x2, the i32 index at which it goes into the sorted 1-D x1. */
export function searchsorted(x1: Tensor, x2: Tensor, options?: { side?: "left" | "right" }): Tensor;
/** One i32 tensor of coordinates per dimension of x (the count is an awaited readback). */
export function nonzero(x: Tensor): Promise<Tensor[]>;
/** The Array API's `unique_all` result (field names as the standard spells them). */
export interface UniqueAllResult {
  values: Tensor;
  indices: Tensor;
  inverse_indices: Tensor;
  counts: Tensor;
}
export function uniqueAll(x: Tensor): Promise<UniqueAllResult>;
export function uniqueCounts(x: Tensor): Promise<{ values: Tensor; counts: Tensor }>;
export function uniqueInverse(x: Tensor): Promise<{ values: Tensor; inverse_indices: Tensor }>;
export function uniqueValues(x: Tensor): Promise<Tensor>;

/** What a model load reports: "download" (bytes), "upload" (layers), "compile" (the warm-up pass). */
export interface LoadProgress {
  stage: "download" | "upload" | "compile";
  loaded: number;
  /** 0 when unknown (a server that sends no Content-Length). */
  total: number;
}

export interface ModelLoadOptions {
  onProgress?: (p: LoadProgress) => void;
  /** false: neither read nor write Cache Storage ("kiln-models-v1"). */
  cache?: boolean;
  /** false: skip the warm-up pass (pipelines then compile on the first call). */
  warmup?: boolean;
}

/** A sentence-transformers folder's files by name ("config.json", "1_Pooling/config.json", ...). */
export type ModelFiles = Record<string, ArrayBuffer | ArrayBufferView>;

export class SentenceEmbedder {
  /** `source`: the folder's URL (config.json, tokenizer.json, modules.json, model.safetensors, ...) or its files. */
  static load(source: string | URL | ModelFiles, options?: ModelLoadOptions & { dtype?: "f32" | "f16" }): Promise<SentenceEmbedder>;
  readonly dimension: number;
  readonly maxSeqLength: number;
  /** Whether encode normalises by default (the folder has a Normalize module). */
  readonly normalizes: boolean;
  readonly dtype: "f32" | "f16";
  /** Row-major [texts.length, dimension]. */
  encode(texts: string | string[], options?: { normalize?: boolean; batchSize?: number }): Promise<Float32Array>;
  tokenize(text: string): Uint32Array;
  /** Frees the weights (after any encode in flight); later calls throw a KilnError. */
  free(): void;
}

export interface GenerateOptions {
  maxNewTokens?: number;
  /** 0 (default): greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  repetitionPenalty?: number;
  repeatLastN?: number;
  seed?: number;
  stop?: string | string[];
  stopAtEos?: boolean;
  /**
   * Tokens recorded ahead of the last one read back (default 8, at most 64): the GPU runs token
   * n while the page records n+1. 0: one token at a time, each read back before the next.
   */
  lookahead?: number;
}

export interface GenerationStats {
  promptTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  decodeTokensPerS: number;
}

export class CausalLM {
  /** A Llama-architecture GGUF: its URL or its bytes. */
  static load(source: string | URL | ArrayBuffer | ArrayBufferView, options?: ModelLoadOptions): Promise<CausalLM>;
  readonly vocabSize: number;
  readonly contextLength: number;
  /** The last generation's numbers and token ids (set as it runs). */
  lastStats: GenerationStats | null;
  lastTokens?: Uint32Array;
  /** Text pieces as they come; yields to the event loop between tokens. */
  stream(prompt: string, options?: GenerateOptions): AsyncGenerator<string, void, void>;
  generate(prompt: string, options?: GenerateOptions): Promise<string>;
  chatPrompt(userText: string): string;
  tokenize(text: string): Uint32Array;
  detokenize(ids: ArrayLike<number>): string;
  free(): void;
}

/** Models on the page's device (kiln-models: the same loaders and forward passes as native). */
export const models: {
  SentenceEmbedder: typeof SentenceEmbedder;
  CausalLM: typeof CausalLM;
  /** The Cache Storage bucket model files are kept in. */
  CACHE_NAME: string;
};

// BEGIN GENERATED (kiln gen)
// elementwise ops of kiln-core's tables (comparisons give u32 0/1)
export function negative(x: Tensor): Tensor;
export function abs(x: Tensor): Tensor;
export function exp(x: Tensor): Tensor;
export function log(x: Tensor): Tensor;
export function sqrt(x: Tensor): Tensor;
export function rsqrt(x: Tensor): Tensor;
export function sin(x: Tensor): Tensor;
export function cos(x: Tensor): Tensor;
export function tan(x: Tensor): Tensor;
export function tanh(x: Tensor): Tensor;
export function sigmoid(x: Tensor): Tensor;
export function relu(x: Tensor): Tensor;
export function gelu(x: Tensor): Tensor;
export function geluTanh(x: Tensor): Tensor;
export function silu(x: Tensor): Tensor;
export function floor(x: Tensor): Tensor;
export function asin(x: Tensor): Tensor;
export function acos(x: Tensor): Tensor;
export function atan(x: Tensor): Tensor;
export function sinh(x: Tensor): Tensor;
export function cosh(x: Tensor): Tensor;
export function asinh(x: Tensor): Tensor;
export function acosh(x: Tensor): Tensor;
export function atanh(x: Tensor): Tensor;
export function log1p(x: Tensor): Tensor;
export function expm1(x: Tensor): Tensor;
export function log2(x: Tensor): Tensor;
export function log10(x: Tensor): Tensor;
export function ceil(x: Tensor): Tensor;
export function trunc(x: Tensor): Tensor;
export function round(x: Tensor): Tensor;
export function sign(x: Tensor): Tensor;
export function reciprocal(x: Tensor): Tensor;
export function square(x: Tensor): Tensor;
export function add(a: Operand, b: Operand): Tensor;
export function subtract(a: Operand, b: Operand): Tensor;
export function multiply(a: Operand, b: Operand): Tensor;
export function divide(a: Operand, b: Operand): Tensor;
export function pow(a: Operand, b: Operand): Tensor;
export function maximum(a: Operand, b: Operand): Tensor;
export function minimum(a: Operand, b: Operand): Tensor;
export function equal(a: Operand, b: Operand): Tensor;
export function notEqual(a: Operand, b: Operand): Tensor;
export function less(a: Operand, b: Operand): Tensor;
export function lessEqual(a: Operand, b: Operand): Tensor;
export function greater(a: Operand, b: Operand): Tensor;
export function greaterEqual(a: Operand, b: Operand): Tensor;
export function atan2(a: Operand, b: Operand): Tensor;
export function hypot(a: Operand, b: Operand): Tensor;
export function logaddexp(a: Operand, b: Operand): Tensor;
export function copysign(a: Operand, b: Operand): Tensor;
export function nextafter(a: Operand, b: Operand): Tensor;
export function remainder(a: Operand, b: Operand): Tensor;
export function floorDivide(a: Operand, b: Operand): Tensor;

// the plain ops of kiln-core's op table (optional: a default, or null for none)
/**
 * kiln-core's `zeros`: a tensor of zeros (dtypes: any).
 * @param shape the shape of the result
 * @param dtype the dtype of the result (default "f32")
 */
export function zeros(shape: number[], dtype?: DType): Tensor;
/**
 * kiln-core's `ones`: a tensor of ones (dtypes: any).
 * @param shape the shape of the result
 * @param dtype the dtype of the result (default "f32")
 */
export function ones(shape: number[], dtype?: DType): Tensor;
/**
 * kiln-core's `full`: a tensor filled with `value` (dtypes: any).
 * @param shape the shape of the result
 * @param value the value of every element
 * @param dtype the dtype of the result (default "f32")
 */
export function full(shape: number[], value: number, dtype?: DType): Tensor;
/**
 * kiln-core's `arange`: `start, start + step, …` below `stop` (numpy's arange) (dtypes: any).
 * @param start the first value
 * @param stop the bound, not included
 * @param step the difference between neighbours (non-zero) (default 1)
 * @param dtype the dtype of the result (default "f32")
 */
export function arange(start: number, stop: number, step?: number, dtype?: DType): Tensor;
/**
 * kiln-core's `random_uniform`: uniform numbers in [low, high), the same on every device (dtypes: float).
 * @param shape the shape of the result
 * @param seed the seed (same seed, same numbers)
 * @param low the lower bound (default 0)
 * @param high the upper bound, not included (default 1)
 * @param dtype the dtype of the result (default "f32")
 */
export function randomUniform(shape: number[], seed: number, low?: number, high?: number, dtype?: DType): Tensor;
/**
 * kiln-core's `random_normal`: normal numbers, the same on every device (dtypes: float).
 * @param shape the shape of the result
 * @param seed the seed (same seed, same numbers)
 * @param mean the mean (default 0)
 * @param std the standard deviation (default 1)
 * @param dtype the dtype of the result (default "f32")
 */
export function randomNormal(shape: number[], seed: number, mean?: number, std?: number, dtype?: DType): Tensor;
/**
 * kiln-core's `where`: `cond ? a : b` elementwise with broadcasting (cond bool, or any dtype non-zero = true) (dtypes: any, bool included).
 * @param cond the condition (bool, or non-zero = true)
 * @param a where cond holds
 * @param b elsewhere
 */
export function where(cond: Tensor, a: Tensor, b: Tensor): Tensor;
/**
 * kiln-core's `cast`: conversion to `dtype` (float to int truncates, saturating; to bool: non-zero is true; from bool: 0 or 1) (dtypes: any, bool included).
 * @param x the input
 * @param dtype the dtype of the result
 */
export function astype(x: Tensor, dtype: DType): Tensor;
/**
 * kiln-core's `matmul`: numpy matmul (1-D operands promoted, batch dims broadcast) (dtypes: any).
 * @param a the left operand
 * @param b the right operand
 */
export function matmul(a: Tensor, b: Tensor): Tensor;
/**
 * kiln-core's `sum`: sum over axes (dtypes: any).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function sum(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `mean`: mean over axes (dtypes: float).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function mean(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `max`: maximum over axes (dtypes: any, bool included).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function max(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `min`: minimum over axes (dtypes: any, bool included).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function min(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `all`: whether every element over axes is true (non-zero); true over an empty axis (dtypes: any, bool included (gives bool)).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function all(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `any`: whether some element over axes is true (non-zero); false over an empty axis (dtypes: any, bool included (gives bool)).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function any(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `var`: variance over axes (dtypes: float).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 * @param ddof delta degrees of freedom (0: population, 1: sample) (default 0)
 */
declare function var_(x: Tensor, axes?: Axes, keepdims?: boolean, ddof?: number): Tensor;
export { var_ as var };
/**
 * kiln-core's `argmax`: index (i32) of the largest element (dtypes: any, bool included).
 * @param x the input
 * @param axis the axis (null: the flattened tensor) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function argmax(x: Tensor, axis?: number | null, keepdims?: boolean): Tensor;
/**
 * kiln-core's `argmin`: index (i32) of the smallest element (dtypes: any, bool included).
 * @param x the input
 * @param axis the axis (null: the flattened tensor) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function argmin(x: Tensor, axis?: number | null, keepdims?: boolean): Tensor;
/**
 * kiln-core's `softmax`: softmax along an axis (dtypes: float).
 * @param x the input
 * @param axis the axis (negative counts from the end) (default -1)
 */
export function softmax(x: Tensor, axis?: number): Tensor;
/**
 * kiln-core's `log_softmax`: log-softmax along an axis (dtypes: float).
 * @param x the input
 * @param axis the axis (negative counts from the end) (default -1)
 */
export function logSoftmax(x: Tensor, axis?: number): Tensor;
/**
 * kiln-core's `layer_norm`: layer normalization over the last axis (dtypes: float).
 * @param x the input
 * @param weight the scale (null: 1) (default null)
 * @param bias the shift (null: 0) (default null)
 * @param eps added to the variance (default 1e-5)
 */
export function layerNorm(x: Tensor, weight?: Tensor | null, bias?: Tensor | null, eps?: number): Tensor;
/**
 * kiln-core's `rms_norm`: RMS normalization over the last axis (dtypes: float).
 * @param x the input
 * @param weight the scale (null: 1) (default null)
 * @param eps added to the mean square (default 1e-6)
 */
export function rmsNorm(x: Tensor, weight?: Tensor | null, eps?: number): Tensor;
/**
 * kiln-core's `batch_norm`: batch normalization (inference) of [N, C, ...] with stats [C] (dtypes: float).
 * @param x the input
 * @param mean the running mean [C]
 * @param variance the running variance [C]
 * @param weight the scale (null: 1) (default null)
 * @param bias the shift (null: 0) (default null)
 * @param eps added to the variance (default 1e-5)
 */
export function batchNorm(x: Tensor, mean: Tensor, variance: Tensor, weight?: Tensor | null, bias?: Tensor | null, eps?: number): Tensor;
/**
 * kiln-core's `conv2d`: 2-D convolution, NCHW (dtypes: any).
 * @param x the input
 * @param w the filters [O, C/groups, KH, KW]
 * @param bias added per output channel (null: none) (default null)
 * @param options.stride the step (height, width) (default 1)
 * @param options.padding zeros added on each side (height, width) (default 0)
 * @param options.dilation the spacing of the filter taps (height, width) (default 1)
 * @param options.groups the channel groups (default 1)
 */
export function conv2d(x: Tensor, w: Tensor, bias?: Tensor | null, options?: { stride?: Pair; padding?: Pair; dilation?: Pair; groups?: number }): Tensor;
/**
 * kiln-core's `max_pool2d`: max pooling, NCHW (dtypes: any).
 * @param x the input
 * @param kernel the window (height, width)
 * @param options.stride the step (height, width) (default kernel)
 * @param options.padding zeros added on each side (height, width) (default 0)
 */
export function maxPool2d(x: Tensor, kernel: Pair, options?: { stride?: Pair; padding?: Pair }): Tensor;
/**
 * kiln-core's `avg_pool2d`: average pooling (padding counts), NCHW (dtypes: any).
 * @param x the input
 * @param kernel the window (height, width)
 * @param options.stride the step (height, width) (default kernel)
 * @param options.padding zeros added on each side (height, width) (default 0)
 */
export function avgPool2d(x: Tensor, kernel: Pair, options?: { stride?: Pair; padding?: Pair }): Tensor;
/**
 * kiln-core's `reshape`: the same data with another shape (one -1 inferred) (dtypes: any, bool included).
 * @param x the input
 * @param shape the new shape (one entry may be -1)
 */
export function reshape(x: Tensor, shape: number[]): Tensor;
/**
 * kiln-core's `permute`: axes reordered (dtypes: any, bool included).
 * @param x the input
 * @param axes result axis i is input axis axes[i]
 */
export function permuteDims(x: Tensor, axes: number[]): Tensor;
/**
 * kiln-core's `transpose`: two axes swapped (numpy's swapaxes) (dtypes: any, bool included).
 * @param x the input
 * @param axis0 one axis
 * @param axis1 the other axis
 */
export function swapaxes(x: Tensor, axis0: number, axis1: number): Tensor;
/**
 * kiln-core's `concat`: tensors joined along an axis (dtypes: any, bool included).
 * @param tensors the tensors to join
 * @param axis the axis (negative counts from the end) (default 0)
 */
export function concat(tensors: Tensor[], axis?: number): Tensor;
/**
 * kiln-core's `slice`: `x[start:stop:step]` along an axis (dtypes: any, bool included).
 * @param x the input
 * @param axis the axis (negative counts from the end)
 * @param start the first index
 * @param stop the bound, not included
 * @param step the step (>= 1) (default 1)
 */
export function slice(x: Tensor, axis: number, start: number, stop: number, step?: number): Tensor;
/**
 * kiln-core's `index_select`: entries picked by 1-D indices (numpy take; negative i32 indices count from the end) (dtypes: any, bool included).
 * @param x the input
 * @param axis the axis (negative counts from the end)
 * @param indices 1-D i32/u32 indices
 */
export function indexSelect(x: Tensor, axis: number, indices: Tensor): Tensor;
/**
 * kiln-core's `gather`: torch.gather along an axis (numpy take_along_axis; negative i32 indices count from the end) (dtypes: any, bool included).
 * @param x the input
 * @param axis the axis (negative counts from the end)
 * @param index i32/u32 indices of x's rank
 */
export function gather(x: Tensor, axis: number, index: Tensor): Tensor;
/**
 * kiln-core's `embedding`: rows of weight [V, D] picked by ids (ids outside [0, V), negative ones included: zeros) (dtypes: any, bool included).
 * @param weight the table [V, D]
 * @param ids i32/u32 row numbers
 */
export function embedding(weight: Tensor, ids: Tensor): Tensor;
/**
 * kiln-core's `rope`: rotary position embedding (rotate-half) (dtypes: float).
 * @param x the input
 * @param posOffset the position of the first row (default 0)
 * @param base the frequency base (default 10000)
 */
export function rope(x: Tensor, posOffset?: number, base?: number): Tensor;
/**
 * kiln-core's `attention`: scaled dot-product attention (dtypes: float).
 * @param q the queries [..., Lq, D]
 * @param k the keys [..., Lk, D]
 * @param v the values [..., Lk, Dv]
 * @param options.causal mask key j > query i (default false)
 * @param options.scale the score scale (null: 1/sqrt(D)) (default null)
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, options?: { causal?: boolean; scale?: number | null }): Tensor;
/**
 * kiln-core's `quantize`: a float [rows, cols] quantized as ggml's reference quantizer does (dtypes: float). Resolves: it waits for a readback.
 * @param x the input
 * @param format the GGUF block format ("q4_0", …)
 */
export function quantize(x: Tensor, format: string): Promise<Tensor>;
/**
 * kiln-core's `dequantize`: f32 [rows, cols] from a quantized matrix (dtypes: u32 (quantized)).
 * @param w the quantized matrix (u32)
 * @param format the GGUF block format ("q4_0", …)
 * @param rows the matrix's rows
 * @param cols the matrix's columns
 */
export function dequantize(w: Tensor, format: string, rows: number, cols: number): Tensor;
/**
 * kiln-core's `quant_matmul`: x [..., K] times Wᵀ for W quantized [N, K], accumulated in f32 (dtypes: float x, u32 (quantized) w).
 * @param x the input
 * @param w the quantized weight [n, K] (u32)
 * @param format the GGUF block format ("q4_0", …)
 * @param n the weight's rows
 */
export function quantMatmul(x: Tensor, w: Tensor, format: string, n: number): Tensor;
/**
 * kiln-core's `quant_embedding`: rows of a quantized table [V, D] picked by ids (out of range: zeros) (dtypes: u32 (quantized) w, i32/u32 ids).
 * @param w the quantized table [V, d] (u32)
 * @param format the GGUF block format ("q4_0", …)
 * @param d the table's columns
 * @param ids i32/u32 row numbers
 */
export function quantEmbedding(w: Tensor, format: string, d: number, ids: Tensor): Tensor;
/**
 * kiln-core's `sort`: `x` sorted along an axis, stable (NaNs last; descending: the reverse order, ties in index order) (dtypes: any, bool included).
 * @param x the input
 * @param options.axis the axis (negative counts from the end) (default -1)
 * @param options.descending largest first (default false)
 */
export function sort(x: Tensor, options?: { axis?: number; descending?: boolean }): Tensor;
/**
 * kiln-core's `argsort`: i32 indices that sort `x` along an axis, stable (ties keep index order, descending too) (dtypes: any, bool included).
 * @param x the input
 * @param options.axis the axis (negative counts from the end) (default -1)
 * @param options.descending largest first (default false)
 */
export function argsort(x: Tensor, options?: { axis?: number; descending?: boolean }): Tensor;
/**
 * kiln-core's `topk`: the k largest (or smallest) elements along an axis and their i32 indices, sorted (ties: the lower index first; NaN is the largest, as in sort) (dtypes: any, bool included).
 * @param x the input
 * @param k how many (at most the axis' length)
 * @param axis the axis (negative counts from the end) (default -1)
 * @param largest the largest (else the smallest) (default true)
 */
export function topk(x: Tensor, k: number, axis?: number, largest?: boolean): { values: Tensor; indices: Tensor };
/**
 * kiln-core's `count_nonzero`: the number (i32) of non-zero elements over axes (dtypes: any, bool included).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 */
export function countNonzero(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
/**
 * kiln-core's `isin`: whether each element of x1 is in x2 (bool; NaN never is) (dtypes: any, bool included (one dtype)).
 * @param x1 the first input
 * @param x2 the second input
 * @param options.invert give the negation (default false)
 */
export function isin(x1: Tensor, x2: Tensor, options?: { invert?: boolean }): Tensor;
/**
 * kiln-core's `cumulative_sum`: running sum along an axis (an axis is required past 1-D; integers wrap) (dtypes: any).
 * @param x the input
 * @param options.axis the axis (null only for a 1-D input) (default null)
 * @param options.dtype the dtype of the result (null: x's) (default null)
 * @param options.includeInitial start with the identity (the result one longer) (default false)
 */
export function cumulativeSum(x: Tensor, options?: { axis?: number | null; dtype?: DType | null; includeInitial?: boolean }): Tensor;
/**
 * kiln-core's `cumulative_prod`: running product along an axis (an axis is required past 1-D; integers wrap) (dtypes: any).
 * @param x the input
 * @param options.axis the axis (null only for a 1-D input) (default null)
 * @param options.dtype the dtype of the result (null: x's) (default null)
 * @param options.includeInitial start with the identity (the result one longer) (default false)
 */
export function cumulativeProd(x: Tensor, options?: { axis?: number | null; dtype?: DType | null; includeInitial?: boolean }): Tensor;
/**
 * kiln-core's `prod`: product over axes (integers wrap; 1 over an empty axis) (dtypes: any).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 * @param dtype the dtype of the result (null: x's) (default null)
 */
export function prod(x: Tensor, axes?: Axes, keepdims?: boolean, dtype?: DType | null): Tensor;
/**
 * kiln-core's `std`: standard deviation over axes, sqrt(var) (dtypes: float).
 * @param x the input
 * @param axes the axes to reduce (null: every axis) (default null)
 * @param keepdims keep the reduced axes with size 1 (default false)
 * @param ddof delta degrees of freedom (0: population, 1: sample) (default 0)
 */
export function std(x: Tensor, axes?: Axes, keepdims?: boolean, ddof?: number): Tensor;
/**
 * kiln-core's `vecdot`: dot product of the vectors along an axis, with broadcasting (sum(x1 * x2, axis)) (dtypes: any).
 * @param x1 the first input
 * @param x2 the second input
 * @param axis the axis of the vectors (default -1)
 */
export function vecdot(x1: Tensor, x2: Tensor, axis?: number): Tensor;
// END GENERATED (kiln gen)
