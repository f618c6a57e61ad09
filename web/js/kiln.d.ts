// Types of kiln.js (Kiln in the browser). The elementwise declarations between the markers are
// written by `kiln-gen` from kiln-core's op table.

export type DType = "f32" | "f16" | "i32" | "u32" | "bool";
export type TypedArray = Float32Array | Int32Array | Uint32Array | Uint16Array | Uint8Array;
export type Operand = Tensor | number;
export type Pair = number | [number] | [number, number];

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

export function zeros(shape: number[], dtype?: DType): Tensor;
export function ones(shape: number[], dtype?: DType): Tensor;
export function full(shape: number[], value: number, dtype?: DType): Tensor;
export function arange(start: number, stop: number, step?: number, dtype?: DType): Tensor;
/** Seeded, counter-based: the same numbers on every device and in every binding. */
export function randomUniform(shape: number[], seed: number, low?: number, high?: number, dtype?: DType): Tensor;
export function randomNormal(shape: number[], seed: number, mean?: number, std?: number, dtype?: DType): Tensor;
export function where(cond: Tensor, a: Tensor, b: Tensor): Tensor;
export function astype(x: Tensor, dtype: DType): Tensor;
export function matmul(a: Tensor, b: Tensor): Tensor;
export function sum(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
export function mean(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
export function max(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
export function min(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
/** Whether every element is true (non-zero) over `axes` (all when absent): a bool tensor. */
export function all(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
/** Whether any element is true (non-zero) over `axes` (all when absent): a bool tensor. */
export function any(x: Tensor, axes?: number | number[] | null, keepdims?: boolean): Tensor;
/** `x` limited to [min, max]; a bound may be a number, a tensor broadcast to x, or omitted. */
export function clip(x: Tensor, min?: number | Tensor | null, max?: number | Tensor | null): Tensor;
declare function var_(x: Tensor, axes?: number | number[] | null, keepdims?: boolean, ddof?: number): Tensor;
export { var_ as var };
export function argmax(x: Tensor, axis?: number | null, keepdims?: boolean): Tensor;
export function argmin(x: Tensor, axis?: number | null, keepdims?: boolean): Tensor;
export function softmax(x: Tensor, axis?: number): Tensor;
export function logSoftmax(x: Tensor, axis?: number): Tensor;
export function layerNorm(x: Tensor, weight?: Tensor | null, bias?: Tensor | null, eps?: number): Tensor;
export function rmsNorm(x: Tensor, weight?: Tensor | null, eps?: number): Tensor;
export function batchNorm(
  x: Tensor,
  mean: Tensor,
  variance: Tensor,
  weight?: Tensor | null,
  bias?: Tensor | null,
  eps?: number,
): Tensor;
export function conv2d(
  x: Tensor,
  w: Tensor,
  bias?: Tensor | null,
  options?: { stride?: Pair; padding?: Pair; dilation?: Pair; groups?: number },
): Tensor;
export function maxPool2d(x: Tensor, kernel: Pair, options?: { stride?: Pair; padding?: Pair }): Tensor;
export function avgPool2d(x: Tensor, kernel: Pair, options?: { stride?: Pair; padding?: Pair }): Tensor;
export function reshape(x: Tensor, shape: number[]): Tensor;
export function permuteDims(x: Tensor, axes: number[]): Tensor;
export function swapaxes(x: Tensor, axis0: number, axis1: number): Tensor;
export function concat(tensors: Tensor[], axis?: number): Tensor;
export function slice(x: Tensor, axis: number, start: number, stop: number, step?: number): Tensor;
export function indexSelect(x: Tensor, axis: number, indices: Tensor): Tensor;
export function gather(x: Tensor, axis: number, index: Tensor): Tensor;
export function embedding(weight: Tensor, ids: Tensor): Tensor;
export function rope(x: Tensor, posOffset?: number, base?: number): Tensor;
export function attention(q: Tensor, k: Tensor, v: Tensor, options?: { causal?: boolean; scale?: number | null }): Tensor;
export function quantFromBytes(bytes: Uint8Array, format: string, rows: number, cols: number): Tensor;
export function quantize(x: Tensor, format: string): Promise<Tensor>;
export function dequantize(w: Tensor, format: string, rows: number, cols: number): Tensor;
export function quantMatmul(x: Tensor, w: Tensor, format: string, n: number): Tensor;
export function quantEmbedding(w: Tensor, format: string, d: number, ids: Tensor): Tensor;

export type Axes = number | number[] | null;
/** Product over `axes` (all when absent), in `dtype` (default: x's). */
export function prod(x: Tensor, axes?: Axes, keepdims?: boolean, dtype?: DType | null): Tensor;
export function std(x: Tensor, axes?: Axes, keepdims?: boolean, ddof?: number): Tensor;
export interface ScanOptions {
  /** Required unless x is 1-D. */
  axis?: number | null;
  dtype?: DType | null;
  /** A leading 0 (sum) or 1 (product) along the axis. */
  includeInitial?: boolean;
}
export function cumulativeSum(x: Tensor, options?: ScanOptions): Tensor;
export function cumulativeProd(x: Tensor, options?: ScanOptions): Tensor;
/** The `n`-th forward difference along `axis`; a number for `prepend` / `append` is one element along it. */
export function diff(
  x: Tensor,
  options?: { axis?: number; n?: number; prepend?: Tensor | number | null; append?: Tensor | number | null },
): Tensor;
export function vecdot(x1: Tensor, x2: Tensor, axis?: number): Tensor;
/** Contracts the last `axes` axes of x1 with the first of x2, or the axes paired by `[axes1, axes2]`. */
export function tensordot(x1: Tensor, x2: Tensor, axes?: number | [number[], number[]]): Tensor;

export function sort(x: Tensor, options?: { axis?: number; descending?: boolean }): Tensor;
export function argsort(x: Tensor, options?: { axis?: number; descending?: boolean }): Tensor;
/** For each element of x2, the i32 index at which it goes into the sorted 1-D x1. */
export function searchsorted(x1: Tensor, x2: Tensor, options?: { side?: "left" | "right" }): Tensor;
export function countNonzero(x: Tensor, axes?: Axes, keepdims?: boolean): Tensor;
export function isin(x1: Tensor, x2: Tensor, options?: { invert?: boolean }): Tensor;
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
// END GENERATED (kiln gen)
