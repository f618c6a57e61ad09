# Nx 0.11's tests and doctests that `make nx-suite` does not run on Kiln.Backend, one entry per
# test, module or tag: {ExUnit filter, kind, reason}. Kinds:
#   :gap          Kiln.Backend cannot do what the test asks: counted against the pass rate.
#   :device       no backend whose tensors live on a device passes the test (Nx itself refuses
#                 such tensors there, or the test compares tensors by identity): counted
#                 against the pass rate all the same.
#   :not_backend  the test fails for a reason other than the default backend: not counted.
#                 Each such entry fails on Nx.BinaryBackend too, on this machine's Erlang/OTP 25
#                 (`make nx-suite NX_SUITE_ARGS=--reference` runs the suite there).
# Filters: {:module, Mod}, {:test, "exact name"} or {:test, ~r/regex/} (tests are named "test
# <describe> <name>", doctests "doctest Nx.fun/arity (n)"), {:location, {file, [lines]}} (the
# lines the tests start at), or a tag (:distributed). What is not listed runs; what then fails
# (last-ulp float differences from Nx.BinaryBackend's exact f32 values, mostly) is a failure.
otp25 = "fails on Nx.BinaryBackend too: Erlang/OTP 25 matches -0.0 as 0.0 in patterns (OTP 27 does not)"

expr =
  "builds an Nx.Defn.Expr around tensors made with the default backend: Nx.Defn.Expr takes " <>
    "Nx.BinaryBackend tensors only (\"cannot convert tensor allocated on Kiln.Backend to an " <>
    "expression\"; EXLA's and Torchx's alike)"

identity =
  "compares device tensors by identity where the runner cannot compare them by value (a pinned " <>
    "`^t` or `{x, x}` pattern, a doctest's `===`): a device tensor's struct holds a reference"

[
  {:distributed, :gap,
   "needs epmd and peer BEAM nodes (Nx.Serving across nodes); a Kiln tensor is a NIF resource of one node"},
  {{:location, {"test/nx_test.exs", [957, 1087, 2600]}}, :gap,
   "indexed_add/indexed_put/gather with out-of-bounds indices: Kiln does not check them (Nx.BinaryBackend " <>
     "raises); a check would read back from the GPU on every call"},
  {{:location, {"test/nx_test.exs", [492, 498]}}, :gap,
   "shifts by negative amounts: Kiln does not refuse them (Nx.BinaryBackend raises); a check would read " <>
     "back from the GPU on every call"},
  {{:location, {"test/nx/defn/expr_test.exs", [187, 192, 202, 227, 238, 259, 281, 295]}}, :device, expr},
  {{:location, {"test/nx/defn/tree_test.exs", [101, 107]}}, :device, expr},
  {{:location, {"test/nx/defn/grad_test.exs", [4309, 4318]}}, :device, expr},
  {{:location, {"test/nx/defn/evaluator_test.exs", [36]}}, :device,
   "expects Nx.TemplateBackend's error when a template meets a tensor; with a device backend the " <>
     "default, Nx raises its incompatible-backends error instead"},
  {{:location, {"test/nx/vectorize_test.exs", [645]}}, :device, identity},
  {{:location, {"test/nx/serving_test.exs", [149]}}, :device, identity},
  {{:location, {"test/nx/defn/grad_test.exs", [122]}}, :device, identity},
  {{:test, "doctest Nx.Defn.Composite.flatten_list/2 (3)"}, :device, identity},
  {{:test, "test f8_e4m3fn dump_f8_e4m3fn/1"}, :not_backend, otp25},
  {{:test, "test bf16 pretty printing"}, :not_backend, otp25},
  {{:test, "test f8 pretty printing"}, :not_backend, otp25},
  {{:location, {"test/nx/non_finite_test.exs", [20, 24, 52, 56]}}, :not_backend,
   "fails on Nx.BinaryBackend too (complex infinities through Complex on Erlang/OTP 25); the " <>
     "test's tensors are module attributes, on the host whatever the default backend"}
]
