# Nx 0.11's tests and doctests that `make nx-suite` does not run on Kiln.Backend, one entry per
# test, module or tag: {ExUnit filter, kind, reason}. Kinds:
#   :gap          Kiln.Backend cannot do what the test asks: counted against the pass rate.
#   :not_backend  the test fails for a reason other than the default backend: not counted.
#                 Each such entry fails on Nx.BinaryBackend too, on this machine's Erlang/OTP 25
#                 (`make nx-suite NX_SUITE_ARGS=--reference` runs the suite there).
# Filters: {:module, Mod}, {:test, "exact name"} or {:test, ~r/regex/} (tests are named "test
# <describe> <name>", doctests "doctest Nx.fun/arity (n)"), {:location, {file, [lines]}} (the
# lines the tests start at), or a tag (:distributed).
otp25 = "fails on Nx.BinaryBackend too: Erlang/OTP 25 matches -0.0 as 0.0 in patterns (OTP 27 does not)"

[
  {:distributed, :gap,
   "needs epmd and peer BEAM nodes (Nx.Serving across nodes); a Kiln tensor is a NIF resource of one node"},
  {{:test, "test f8_e4m3fn dump_f8_e4m3fn/1"}, :not_backend, otp25},
  {{:test, "test bf16 pretty printing"}, :not_backend, otp25},
  {{:test, "test f8 pretty printing"}, :not_backend, otp25},
  {{:location, {"test/nx/non_finite_test.exs", [20, 24, 52, 56]}}, :not_backend,
   "fails on Nx.BinaryBackend too (complex infinities through Complex on Erlang/OTP 25); the " <>
     "test's tensors are module attributes, on the host whatever the default backend"}
]
