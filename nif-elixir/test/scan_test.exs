defmodule KilnScanTest do
  # The scans, bitwise ops, product / standard deviation, diff, vecdot and dot/tensordot under
  # their Nx names, against references computed here in Elixir.
  use ExUnit.Case, async: true
  import Kiln.Ref
  import Bitwise

  setup do
    :rand.seed(:exsss, {6, 6, 6})
    :ok
  end

  defp t(vals, shape, type \\ {:f, 32}),
    do: Kiln.tensor(vals, type: type) |> Kiln.reshape(List.to_tuple(shape))

  defp running(l, f), do: l |> Enum.scan(f)

  test "cumulative_sum / cumulative_product along an axis, past one block, with include_initial" do
    for {shape, axis} <- [{[7], 0}, {[13, 17], 1}, {[3, 1030], 1}, {[5, 4], 0}] do
      x = rand_ints(numel(shape), -5, 5)
      tx = t(x, shape, {:s, 32})
      want = lanes(x, shape, axis, &running(&1, fn a, b -> a + b end))
      assert Kiln.cumulative_sum(tx, axis: axis) |> flat() == want
      wantp = lanes(x, shape, axis, &running(&1, fn a, b -> wrap32(a * b) end))
      assert Kiln.cumulative_product(tx, axis: axis) |> flat() == wantp
    end

    x = Kiln.tensor([1.0, 2.0, 3.0])
    assert Kiln.cumulative_sum(x, include_initial: true) |> flat() == [0.0, 1.0, 3.0, 6.0]
    assert Kiln.cumulative_prod(x, include_initial: true) |> flat() == [1.0, 1.0, 2.0, 6.0]
    b = Kiln.tensor([1, 0, 1], type: {:u, 8})
    assert Kiln.cumulative_sum(b, type: {:s, 32}) |> flat() == [1, 1, 2]
    assert_raise Kiln.Error, ~r/dtype_mismatch/, fn -> Kiln.cumulative_sum(b) end
    assert_raise Kiln.Error, ~r/invalid_argument/, fn -> Kiln.cumulative_sum(x, axis: 3) end
  end

  test "bitwise ops under Nx's names" do
    a = rand_ints(40, -2_000_000_000, 2_000_000_000)
    b = rand_ints(40, -2_000_000_000, 2_000_000_000)
    n = rand_ints(40, 0, 31)
    ta = Kiln.tensor(a, type: {:s, 32})
    tb = Kiln.tensor(b, type: {:s, 32})
    tn = Kiln.tensor(n, type: {:s, 32})
    assert Kiln.bitwise_and(ta, tb) |> flat() == Enum.zip_with(a, b, &band/2)
    assert Kiln.bitwise_or(ta, tb) |> flat() == Enum.zip_with(a, b, &bor/2)
    assert Kiln.bitwise_xor(ta, tb) |> flat() == Enum.zip_with(a, b, &bxor/2)
    assert Kiln.bitwise_not(ta) |> flat() == Enum.map(a, &bnot/1)
    assert Kiln.right_shift(ta, tn) |> flat() == Enum.zip_with(a, n, &(&1 >>> &2))
    assert Kiln.left_shift(ta, tn) |> flat() == Enum.zip_with(a, n, &wrap32(&1 <<< &2))
    assert Kiln.left_shift(ta, 40) |> flat() == List.duplicate(0, 40)

    assert_raise Kiln.Error, ~r/dtype_mismatch/, fn ->
      Kiln.bitwise_and(Kiln.tensor([1.0]), Kiln.tensor([1.0]))
    end
  end

  test "product, standard_deviation, diff, vecdot, dot" do
    x = rand_ints(12, -4, 4)
    tx = t(x, [3, 4], {:s, 32})
    assert Kiln.product(tx, axes: [1]) |> flat() == Enum.chunk_every(x, 4) |> Enum.map(&Enum.product/1)
    f = rand_list(20) |> Enum.map(&(&1 * 1.0))
    tf = t(f, [4, 5])
    want = Enum.chunk_every(f, 5) |> Enum.map(&:math.sqrt(var(&1, 1)))
    assert_close(Kiln.standard_deviation(tf, axes: [1], ddof: 1) |> flat(), want)

    assert Kiln.diff(tx, axis: 1) |> flat() ==
             Enum.chunk_every(x, 4) |> Enum.flat_map(fn r -> Enum.zip_with(tl(r), r, &(&1 - &2)) end)

    assert Kiln.diff(tx, axis: 0, n: 3) |> Kiln.shape() == {0, 4}
    v = rand_ints(4, -9, 9)

    assert Kiln.vecdot(tx, Kiln.tensor(v, type: {:s, 32})) |> flat() ==
             Enum.chunk_every(x, 4) |> Enum.map(fn r -> Enum.sum(Enum.zip_with(r, v, &*/2)) end)

    m = rand_ints(8, -9, 9)
    tm = t(m, [4, 2], {:s, 32})
    assert Kiln.dot(tx, [1], tm, [0]) |> flat() == Kiln.matmul(tx, tm) |> flat()
    assert Kiln.tensordot(tx, tm, axes: 1) |> flat() == Kiln.matmul(tx, tm) |> flat()
    assert_raise Kiln.Error, ~r/shape_mismatch/, fn -> Kiln.dot(tx, [0], tm, [0]) end
  end

  defp wrap32(v) do
    v = band(v, 0xFFFFFFFF)
    if v >= 0x80000000, do: v - 0x100000000, else: v
  end
end
