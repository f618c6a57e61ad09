defmodule KilnNxSuite.MixProject do
  # Nx's own test suite and doctests with Kiln.Backend as the default backend (`make nx-suite`).
  # This file is copied to build/nx-suite/mix.exs next to a copy of Nx's test/ folder (Nx's
  # tests read fixtures by paths relative to the project, test/fixtures/...), so the paths
  # below are relative to build/nx-suite.
  use Mix.Project

  @root Path.expand("../..", __DIR__)

  def project do
    [
      app: :kiln_nx_suite,
      version: "0.1.0",
      elixir: "~> 1.17",
      # The runner's own lib; Nx's test/support is compiled by run.exs (KilnNxSuite.Loader).
      elixirc_paths: [Path.join(@root, "nif-elixir/nx-suite/lib")],
      # Nx's test/support defines protocol implementations (Nx.Container for test structs)
      # after mix compiles: unconsolidated protocols see them.
      consolidate_protocols: false,
      deps: deps()
    ]
  end

  def application, do: [extra_applications: [:logger]]

  # Kiln (nif-elixir) and the same Nx it builds against (see nif-elixir/mix.exs).
  defp deps do
    kiln = {:kiln, path: Path.join(@root, "nif-elixir")}

    case System.get_env("KILN_NX_VENDOR") do
      dir when dir in [nil, ""] ->
        [kiln, {:nx, "~> 0.11"}]

      dir ->
        [
          kiln,
          {:nx, path: Path.join(dir, "nx-0.11.0"), override: true},
          {:complex, path: Path.join(dir, "complex-0.6.0"), override: true},
          {:telemetry, path: Path.join(dir, "telemetry-1.4.1"), override: true}
        ]
    end
  end
end
