// The wasm module and what the generated and hand-written parts of kiln.js share: the error
// classes, the calling conventions of the elementwise ops and the argument conversions of the
// generated wrappers (ops_gen.js).
import * as wasm from "../pkg/kiln_web.js";

export { wasm };

/** A Kiln error: `code` is the stable Kiln status number, `codeName` its name (e.g. "SHAPE_MISMATCH"). */
export class KilnError extends Error {
  constructor(message, code = 13, codeName = "INTERNAL") {
    super(message);
    this.name = "KilnError";
    this.code = code;
    this.codeName = codeName;
  }
}

/** "SHAPE_MISMATCH" -> "ShapeMismatchError". */
function className(codeName) {
  return codeName.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase()) + "Error";
}

/** One KilnError subclass per status, by its name: `errors.SHAPE_MISMATCH`. */
export function makeErrorClasses(codes) {
  const classes = {};
  for (const [code, codeName] of codes) {
    const name = className(codeName);
    classes[codeName] = {
      [name]: class extends KilnError {
        constructor(message) {
          super(message, code, codeName);
          this.name = name;
        }
      },
    }[name];
  }
  return classes;
}

export function unaryOp(op, x) {
  return wasm.unary(op, x);
}

/** Tensor OP tensor, tensor OP number or number OP tensor (the number takes the tensor's dtype). */
export function binaryOp(op, a, b) {
  if (typeof a === "number") return wasm.binaryScalar(op, b, a, true);
  if (typeof b === "number") return wasm.binaryScalar(op, a, b, false);
  return wasm.binary(op, a, b);
}

/** Runs `f` on a wasm TensorList of `tensors` (the handles stay valid in JavaScript). */
export function withList(tensors, f) {
  const list = new wasm.TensorList();
  try {
    for (const t of tensors) list.push(t);
    return f(list);
  } finally {
    list.free();
  }
}

/** Axes: a number is one axis; `undefined` or `null`: every axis. */
export const axesOf = (axes) => (axes === undefined || axes === null ? undefined : typeof axes === "number" ? [axes] : axes);

/** (height, width): one number is both. */
export const pairOf = (v) => (v === undefined || v === null ? undefined : typeof v === "number" ? [v] : v);

/** An optional tensor handed over as a clone: a handle given to wasm by value is consumed. */
export const opt = (t) => (t === undefined || t === null ? undefined : t.clone());
