defmodule Kiln.Ref do
  @moduledoc false
  # Independent CPU references in plain Elixir (f64), on flat row-major lists with a shape list.
  import ExUnit.Assertions

  def rand_list(n, lo \\ -1.0, hi \\ 1.0), do: for(_ <- 1..n//1, do: lo + :rand.uniform() * (hi - lo))
  def rand_ints(n, lo, hi), do: for(_ <- 1..n//1, do: lo + :rand.uniform(hi - lo + 1) - 1)

  def numel(shape), do: Enum.product(shape)

  def strides(shape) do
    {s, _} = List.foldr(shape, {[], 1}, fn d, {acc, m} -> {[m | acc], m * d} end)
    s
  end

  def coords(i, shape), do: Enum.zip_with(strides(shape), shape, fn s, d -> rem(div(i, s), d) end)
  def index(coords, shape), do: Enum.zip_with(coords, strides(shape), &(&1 * &2)) |> Enum.sum()

  def norm_axis(a, r), do: if(a < 0, do: a + r, else: a)

  def broadcast_shape(a, b) do
    r = max(length(a), length(b))
    pa = List.duplicate(1, r - length(a)) ++ a
    pb = List.duplicate(1, r - length(b)) ++ b
    Enum.zip_with(pa, pb, fn x, y -> if x == 1, do: y, else: x end)
  end

  # Value of a broadcast operand at output coordinates.
  defp bget(t, shape, oc) do
    pad = length(oc) - length(shape)
    c = oc |> Enum.drop(pad) |> Enum.zip_with(shape, fn x, d -> if d == 1, do: 0, else: x end)
    elem(t, index(c, shape))
  end

  def binary(a, as, b, bs, f) do
    os = broadcast_shape(as, bs)
    {ta, tb} = {List.to_tuple(a), List.to_tuple(b)}

    vals =
      for i <- 0..(numel(os) - 1)//1,
          do:
            (
              c = coords(i, os)
              f.(bget(ta, as, c), bget(tb, bs, c))
            )

    {vals, os}
  end

  # Reduce `axes` (nil = all) with f over each group (a list), keeping dims when keep.
  def reduce(x, shape, axes, keep, f) do
    r = length(shape)
    axes = if axes == nil, do: Enum.to_list(0..(r - 1)//1), else: Enum.map(axes, &norm_axis(&1, r))
    kshape = shape |> Enum.with_index() |> Enum.map(fn {d, i} -> if i in axes, do: 1, else: d end)

    groups =
      x
      |> Enum.with_index()
      |> Enum.group_by(
        fn {_, i} ->
          i
          |> coords(shape)
          |> Enum.with_index()
          |> Enum.map(fn {c, j} -> if j in axes, do: 0, else: c end)
          |> index(kshape)
        end,
        &elem(&1, 0)
      )

    vals = for o <- 0..(numel(kshape) - 1)//1, do: f.(Map.get(groups, o, []))

    oshape =
      if keep,
        do: kshape,
        else: shape |> Enum.with_index() |> Enum.reject(fn {_, i} -> i in axes end) |> Enum.map(&elem(&1, 0))

    {vals, oshape}
  end

  # Applies f (list -> list) to every lane along `axis`.
  def lanes(x, shape, axis, f) do
    axis = norm_axis(axis, length(shape))
    t = List.to_tuple(x)
    n = Enum.at(shape, axis)
    s = Enum.at(strides(shape), axis)
    kshape = List.replace_at(shape, axis, 1)

    out =
      for o <- 0..(numel(kshape) - 1)//1, reduce: %{} do
        acc ->
          base = index(coords(o, kshape), shape)
          idx = for k <- 0..(n - 1)//1, do: base + k * s
          res = f.(Enum.map(idx, &elem(t, &1)))
          Enum.zip(idx, res) |> Enum.into(acc)
      end

    for i <- 0..(length(x) - 1)//1, do: Map.fetch!(out, i)
  end

  def matmul2(a, [m, k], b, [k, n]) do
    ta = List.to_tuple(a)
    tb = List.to_tuple(b)

    for i <- 0..(m - 1)//1,
        j <- 0..(n - 1)//1,
        do: Enum.sum(for(l <- 0..(k - 1)//1, do: elem(ta, i * k + l) * elem(tb, l * n + j)))
  end

  def permute(x, shape, axes) do
    t = List.to_tuple(x)
    oshape = Enum.map(axes, &Enum.at(shape, &1))

    vals =
      for i <- 0..(numel(oshape) - 1)//1 do
        oc = coords(i, oshape)
        ic = for d <- 0..(length(shape) - 1)//1, do: Enum.at(oc, Enum.find_index(axes, &(&1 == d)))
        elem(t, index(ic, shape))
      end

    {vals, oshape}
  end

  def softmax(lane) do
    m = Enum.max(lane)
    e = Enum.map(lane, &:math.exp(&1 - m))
    s = Enum.sum(e)
    Enum.map(e, &(&1 / s))
  end

  def mean(l), do: Enum.sum(l) / length(l)

  def var(l, ddof \\ 0),
    do:
      (
        m = mean(l)
        Enum.sum(Enum.map(l, &((&1 - m) ** 2))) / (length(l) - ddof)
      )

  def assert_close(actual, expected, rtol \\ 1.0e-4, atol \\ 1.0e-5) do
    assert length(actual) == length(expected), "length #{length(actual)} != #{length(expected)}"

    Enum.zip(actual, expected)
    |> Enum.with_index()
    |> Enum.each(fn {{a, e}, i} ->
      ok = is_number(a) and abs(a - e) <= atol + rtol * abs(e)
      assert ok, "element #{i}: got #{inspect(a)}, expected #{inspect(e)}"
    end)
  end

  def flat(t), do: Kiln.to_flat_list(t)
end
