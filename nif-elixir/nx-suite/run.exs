# `make nx-suite` runs this in build/nx-suite (MIX_ENV=test mix run run.exs [TEST FILES...]):
# Nx's test files (all of test/**/*_test.exs, or the ones named) on Kiln.Backend.
#
# Not `mix test`, for two reasons. Nx's tests compare tensors with `==`, which holds for equal
# Nx.BinaryBackend tensors only (their bytes are in the struct; a device tensor holds a
# reference): the files are compiled through KilnNxSuite.Loader, which makes `==` compare
# tensors by value and changes nothing else. And some of Nx's test modules build tensors at
# compile time as module attributes (`@tensor Nx.tensor(...)` in heatmap_test.exs,
# vectorize_test.exs...), and a Kiln tensor holds a NIF reference, which cannot be a
# compile-time literal (EXLA's cannot either). So the files are compiled with Nx.BinaryBackend as
# the default, as Nx's own suite runs, and Kiln.Backend becomes the global default backend only
# then, before any test runs (`mix test` starts async tests while it is still compiling). Those attribute tensors stay on the host; any op that mixes them
# with a Kiln tensor runs on Kiln.Backend (Nx picks the non-binary backend).
#
# Exit status 1 when the pass rate is below the floor (KilnNxSuite.Formatter.floor/0).

ExUnit.start(
  autorun: false,
  assert_receive_timeout: 1000,
  exclude: KilnNxSuite.Exclusions.filters(),
  formatters: [KilnNxSuite.Formatter]
)

# `--reference` runs everything on Nx.BinaryBackend instead (Nx's own setting): what fails there
# fails for reasons other than Kiln (this Erlang/OTP, Nx itself), and is listed :not_backend.
{reference?, argv} =
  case System.argv() do
    ["--reference" | rest] -> {true, rest}
    argv -> {false, argv}
  end

files =
  case argv do
    [] -> Path.wildcard("test/**/*_test.exs")
    named -> named
  end

# Compiled through KilnNxSuite.Loader: `==` compares tensors by value (see its moduledoc).
t0 = System.monotonic_time(:millisecond)
Nx.global_default_backend(Nx.BinaryBackend)
support = Path.wildcard("test/support/*.ex") |> Enum.map(&KilnNxSuite.Loader.compile_file/1)

rewritten =
  files
  |> Task.async_stream(&KilnNxSuite.Loader.compile_file/1, timeout: :infinity, ordered: false)
  |> Enum.map(fn {:ok, n} -> n end)

IO.puts(
  "#{length(files)} test files compiled in #{System.monotonic_time(:millisecond) - t0} ms; " <>
    "#{Enum.sum(support ++ rewritten)} `==`/`!=` compare tensors by value"
)

unless reference?, do: Nx.global_default_backend(Kiln.Backend)
IO.puts("default backend: #{inspect(Nx.default_backend())}")

ExUnit.run()
if KilnNxSuite.Formatter.below_floor?(), do: System.halt(1)
