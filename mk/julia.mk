# Kiln.jl (julia/) with a real Julia: included by the top-level Makefile.
#   make julia          install Julia if needed (scripts/julia: `julia` 1.5+ from the PATH, else
#                       Debian bullseye's 1.5.3 unpacked into $(KILN_TOOLS_CACHE) once) and print its version
#   make julia-test     julia/test/runtests.jl against target/release/libkiln.so, with its test count
#   make julia-repl     a REPL with Kiln.jl loaded (scripts/julia --project=julia)
# julia-check (the static @ccall check against include/kiln.h) stays in mk/c.mk.

JULIA ?= scripts/julia

.PHONY: julia julia-test julia-repl

julia:
	@$(JULIA) --startup-file=no -e 'println("julia ", VERSION, " (", Sys.BINDIR, ")")'

# Runs the test file directly rather than Pkg.test(): Pkg.test() first installs the General
# registry (from the network), which Kiln.jl does not need (its dependencies are stdlibs).
julia-test: c-lib julia
	KILN_LIB=$(abspath $(KILN_LIBDIR))/libkiln.so JULIA_NUM_THREADS=$${JULIA_NUM_THREADS:-2} \
		$(JULIA) --startup-file=no --project=julia julia/test/runtests.jl

julia-repl: c-lib julia
	KILN_LIB=$(abspath $(KILN_LIBDIR))/libkiln.so $(JULIA) --project=julia -e 'using Kiln' -i

TEST_TARGETS += julia-test
