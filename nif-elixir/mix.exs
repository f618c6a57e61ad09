defmodule Mix.Tasks.Compile.KilnNif do
  @moduledoc """
  Builds the native crate (`cargo build -p kiln-nif --release` in the workspace root) and copies
  the library to `priv/kiln_nif.so`. Set `KILN_NIF_SKIP_CARGO=1` to only copy a library that the
  Makefile (`make elixir-nif`) already built.
  """
  use Mix.Task.Compiler

  @root Path.expand("..", __DIR__)

  @impl true
  def run(_args) do
    target_dir = System.get_env("CARGO_TARGET_DIR") || Path.join(@root, "target")
    lib = Path.join([target_dir, "release", lib_name()])
    dest = Path.expand("priv/kiln_nif.so", __DIR__)

    built? =
      cond do
        System.get_env("KILN_NIF_SKIP_CARGO") in ["1", "true"] ->
          true

        System.find_executable("cargo") == nil ->
          Mix.shell().error(
            "kiln: cargo not found; cannot build the NIF (install Rust, then `make elixir-nif`)"
          )

          false

        true ->
          {_, status} =
            System.cmd("cargo", ["build", "-p", "kiln-nif", "--release"],
              cd: @root,
              into: IO.stream(:stdio, :line),
              stderr_to_stdout: true
            )

          if status != 0, do: Mix.raise("kiln: `cargo build -p kiln-nif --release` failed (status #{status})")
          true
      end

    cond do
      built? and File.exists?(lib) ->
        File.mkdir_p!(Path.dirname(dest))

        if stale?(lib, dest) do
          # Copy to a temp name then rename: a running VM keeps its mapping of the old file.
          tmp = dest <> ".tmp"
          File.cp!(lib, tmp)
          File.rename!(tmp, dest)
          {:ok, []}
        else
          {:noop, []}
        end

      true ->
        {:noop, []}
    end
  end

  defp stale?(src, dest) do
    case {File.stat(src), File.stat(dest)} do
      {{:ok, s}, {:ok, d}} -> s.size != d.size or File.read!(src) != File.read!(dest)
      _ -> true
    end
  end

  defp lib_name do
    case :os.type() do
      {:unix, :darwin} -> "libkiln_nif.dylib"
      {:win32, _} -> "kiln_nif.dll"
      _ -> "libkiln_nif.so"
    end
  end
end

defmodule Kiln.MixProject do
  use Mix.Project

  def project do
    [
      app: :kiln,
      version: "0.1.0",
      # Nx 0.11 needs 1.17+: `scripts/mix` (make elixir-test) runs a pinned 1.18.4.
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      compilers: [:kiln_nif | Mix.compilers()],
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps(),
      docs: [main: "Kiln"]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end

  # Nx for Kiln.Backend: from hex.pm by version, or, when KILN_NX_VENDOR names a folder (as
  # `scripts/mix` sets it unless KILN_NX=hex), as path dependencies on the upstream release
  # sources unpacked there (offline; override: Nx's own mix.exs names complex and telemetry by
  # version).
  defp deps do
    case System.get_env("KILN_NX_VENDOR") do
      dir when dir in [nil, ""] ->
        [{:nx, "~> 0.11"}]

      dir ->
        [
          {:nx, path: Path.join(dir, "nx-0.11.0"), override: true},
          {:complex, path: Path.join(dir, "complex-0.6.0"), override: true},
          {:telemetry, path: Path.join(dir, "telemetry-1.4.1"), override: true}
        ]
    end
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
