# Nx 0.11's tests and doctests that `make nx-suite` does not run on Kiln.Backend, one entry per
# test, module or tag: {ExUnit filter, kind, reason}. Kinds:
#   :gap          Kiln.Backend cannot do what the test asks: counted against the pass rate.
#   :not_backend  the test is not about the default backend: not counted.
# Filters: {:module, Mod}, {:test, "exact name"} or {:test, ~r/regex/} (doctests are named
# "doctest Nx.fun/arity (n)"), {:describe, "..."} or a tag (:distributed).
[
  {:distributed, :gap,
   "needs epmd and peer BEAM nodes (Nx.Serving across nodes); a Kiln tensor is a NIF resource of one node"}
]
