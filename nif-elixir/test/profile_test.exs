defmodule Kiln.ProfileTest do
  use ExUnit.Case, async: false

  test "a profile counts each op's dispatches and prints a table" do
    a = Kiln.tensor(Enum.map(1..300, &(&1 * 1.0)))

    {sum, p} =
      Kiln.profile(fn ->
        b = Enum.reduce(1..3, a, fn _, acc -> Kiln.add(acc, a) end)
        b |> Kiln.sum() |> Kiln.to_number()
      end)

    assert sum == 4 * Enum.sum(1..300)
    add = Enum.find(p.rows, &(&1.op == "elementwise:add"))
    assert add.calls == 3
    assert add.timed == 3
    assert p.clock in ["gpu_timestamps", "wall_clock"]
    assert_in_delta Enum.sum(Enum.map(p.rows, & &1.share)), 1.0, 1.0e-9
    assert p.text =~ "elementwise:add"
  end

  test "the profile stops when the function raises, and one runs at a time" do
    assert_raise RuntimeError, fn -> Kiln.profile(fn -> raise "boom" end) end
    {:ok, _} = {:ok, Kiln.profile(fn -> :ok end)}

    assert_raise Kiln.Error, ~r/already running/, fn ->
      Kiln.profile(fn -> Kiln.profile(fn -> :ok end) end)
    end

    {_, p} = Kiln.profile(fn -> :ok end)
    assert p.rows == []
  end
end
