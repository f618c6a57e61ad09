defmodule KilnNxSuite.Formatter do
  @moduledoc false
  # An ExUnit formatter that counts Nx's tests on Kiln.Backend: passed, failed (failures and
  # tests a failed setup_all made invalid), excluded for a Kiln gap, excluded as no device
  # backend's to pass, excluded as failing on Nx.BinaryBackend too, and skipped (by Nx itself),
  # then prints
  #
  #   pass rate = passed / (passed + failed + excluded for Kiln gaps + excluded as device-only)
  #
  # with the failures grouped by the first line of their error (the failure classes). The full
  # failure reports go to failures.txt in the project folder (build/nx-suite).
  use GenServer

  # The pass rate `make nx-suite` must reach (percent), else it fails.
  @floor 90.0
  def floor, do: @floor

  @doc "Whether the last suite's pass rate was below the floor (after ExUnit.run/0)."
  def below_floor?, do: :persistent_term.get({__MODULE__, :rate}, 0.0) < @floor

  @impl true
  def init(opts) do
    {:ok,
     %{
       opts: opts,
       entries: KilnNxSuite.Exclusions.entries(),
       counts: %{passed: 0, failed: 0, gap: 0, device: 0, not_backend: 0, skipped: 0},
       failures: [],
       by_entry: %{},
       # test time per module (µs), for the slowest ones
       module_us: %{},
       slow: []
     }}
  end

  @impl true
  def handle_cast({:test_finished, %ExUnit.Test{state: state} = test}, s) do
    s = %{s | module_us: Map.update(s.module_us, test.module, test.time, &(&1 + test.time))}
    s = %{s | slow: Enum.take(Enum.sort_by([{test.time, test} | s.slow], &(-elem(&1, 0))), 5)}
    {:noreply, record(state, test, s)}
  end

  def handle_cast({:suite_finished, times}, s) do
    report(s, times)
    {:noreply, s}
  end

  def handle_cast(_event, s), do: {:noreply, s}

  defp record(nil, _test, s), do: bump(s, :passed)
  defp record({:skipped, _}, _test, s), do: bump(s, :skipped)

  defp record({:excluded, _}, test, s) do
    # (ExUnit filters see the test's name and module as the tags :test and :module too.)
    tags = Map.merge(test.tags, %{test: test.name, module: test.module})

    case KilnNxSuite.Exclusions.match(s.entries, tags) do
      {_, kind, _reason} = entry ->
        s = bump(s, kind)
        %{s | by_entry: Map.update(s.by_entry, entry, 1, &(&1 + 1))}

      nil ->
        # An exclusion not from the list: a gap, to be safe, and named.
        IO.puts("excluded by no entry of #{KilnNxSuite.Exclusions.path()}: #{short_name(test)}")
        bump(s, :gap)
    end
  end

  defp record({kind, _} = state, test, s) when kind in [:failed, :invalid] do
    s = bump(s, :failed)
    %{s | failures: [{test, state} | s.failures]}
  end

  defp bump(s, key), do: %{s | counts: Map.update!(s.counts, key, &(&1 + 1))}

  defp report(s, times) do
    c = s.counts
    counted = c.passed + c.failed + c.gap + c.device
    rate = if counted == 0, do: 0.0, else: 100 * c.passed / counted
    :persistent_term.put({__MODULE__, :rate}, rate)
    failures = Enum.reverse(s.failures)
    write_failures(failures)

    classes =
      failures
      |> Enum.group_by(fn {test, state} -> failure_class(test, state) end)
      |> Enum.sort_by(fn {_, l} -> -length(l) end)

    IO.puts("\nFailure classes (count, first line of the error, a few tests):")

    for {class, list} <- classes do
      names = list |> Enum.take(3) |> Enum.map_join("; ", fn {t, _} -> short_name(t) end)
      IO.puts("  #{String.pad_leading(Integer.to_string(length(list)), 4)}  #{class}\n        #{names}")
    end

    IO.puts("\nExcluded (count, kind, reason):")

    for {{filter, kind, reason}, n} <- Enum.sort_by(s.by_entry, fn {_, n} -> -n end) do
      IO.puts(
        "  #{String.pad_leading(Integer.to_string(n), 4)}  #{kind}  #{inspect(filter, charlists: :as_lists)}: #{reason}"
      )
    end

    slowest =
      s.module_us
      |> Enum.sort_by(fn {_, us} -> -us end)
      |> Enum.take(5)
      |> Enum.map_join(", ", fn {m, us} -> "#{inspect(m)} #{Float.round(us / 1_000_000, 1)} s" end)

    IO.puts("\nSlowest modules (summed test time, tests run 4 at a time): #{slowest}")

    IO.puts(
      "Slowest tests: " <>
        Enum.map_join(s.slow, ", ", fn {us, t} -> "#{short_name(t)} #{Float.round(us / 1_000_000, 1)} s" end)
    )

    IO.puts("""

    Nx #{Application.spec(:nx, :vsn)} test suite and doctests on #{inspect(elem(Nx.default_backend(), 0))} \
    (#{Float.round(Map.get(times, :run, 0) / 1_000_000, 1)} s):
      passed #{c.passed}, failed #{c.failed}, excluded for Kiln gaps #{c.gap}, excluded as no \
    device backend's to pass #{c.device}, excluded as failing on Nx.BinaryBackend too \
    #{c.not_backend}, skipped by Nx #{c.skipped}
      pass rate #{:erlang.float_to_binary(rate, decimals: 1)}% = passed / (passed + failed + \
    excluded for gaps + excluded as device-only) = #{c.passed}/#{counted} (floor #{@floor}%)
    """)
  end

  defp short_name(%ExUnit.Test{module: m, name: n}), do: "#{inspect(m)} #{n}"

  # The first line of the error message, with numbers and tensor contents left out, so that one
  # cause reads as one class.
  defp failure_class(_test, {:invalid, m}), do: "setup_all failed in #{inspect(m)}"

  defp failure_class(_test, {:failed, [{kind, reason, _stack} | _]}) do
    msg =
      case {kind, reason} do
        {:error, %ExUnit.AssertionError{} = e} -> "assertion: " <> (e.message || "")
        {:error, %ExUnit.TimeoutError{}} -> "timeout"
        {:error, e} when is_exception(e) -> inspect(e.__struct__) <> ": " <> Exception.message(e)
        {k, r} -> "#{inspect(k)}: #{inspect(r, limit: 5)}"
      end

    msg |> String.split("\n") |> hd() |> String.slice(0, 160)
  end

  defp write_failures(failures) do
    text =
      failures
      |> Enum.with_index(1)
      |> Enum.map(fn
        {{test, {:failed, f}}, i} ->
          ExUnit.Formatter.format_test_failure(test, f, i, 100, fn _, msg -> msg end)

        {{test, {:invalid, m}}, i} ->
          "  #{i}) #{short_name(test)}: invalid (setup_all of #{inspect(m)} failed)\n"
      end)

    File.write!("failures.txt", text)
  end
end
