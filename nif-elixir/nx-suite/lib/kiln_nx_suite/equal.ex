defmodule KilnNxSuite.Equal do
  @moduledoc false
  # `==` with Nx tensors compared by value. Nx's tests compare tensors with `==` (`assert
  # Nx.sum(t) == Nx.tensor(6)`), which on Nx.BinaryBackend compares the structs, bytes included.
  # A device backend's tensor holds a reference, so two equal tensors are never `==` (EXLA's and
  # Torchx's could not pass these either). Here two tensors are equal when their shape, type,
  # names, vectorized axes and elements are, bit for bit (-0.0 is not 0.0) but for NaN's sign
  # and payload, which no Nx function promises (Nx.BinaryBackend writes one NaN, a GPU another):
  # struct equality on Nx.BinaryBackend, short of that. Every other term compares as `==` does.

  def eq(a, b), do: equal?(a, b)
  def neq(a, b), do: not equal?(a, b)

  defp equal?(%Nx.Tensor{data: %da{}} = a, %Nx.Tensor{data: %db{}} = b) do
    if materialized?(da) and materialized?(db) do
      a.shape == b.shape and a.type == b.type and a.names == b.names and
        a.vectorized_axes == b.vectorized_axes and
        (bytes(a) == bytes(b) or (not Nx.Type.integer?(a.type) and elements(a) == elements(b)))
    else
      a == b
    end
  end

  defp equal?([x | xs], [y | ys]), do: equal?(x, y) and equal?(xs, ys)

  defp equal?(a, b) when is_tuple(a) and is_tuple(b) and tuple_size(a) == tuple_size(b),
    do: equal?(Tuple.to_list(a), Tuple.to_list(b))

  defp equal?(%s{} = a, %s{} = b), do: equal?(Map.from_struct(a), Map.from_struct(b))

  defp equal?(a, b) when is_map(a) and is_map(b) and not is_struct(a) and not is_struct(b) do
    map_size(a) == map_size(b) and
      Enum.all?(a, fn {k, v} -> Map.has_key?(b, k) and equal?(v, Map.fetch!(b, k)) end)
  end

  defp equal?(a, b), do: a == b

  defp materialized?(mod), do: mod in [Kiln.Backend, Nx.BinaryBackend]

  defp bytes(t), do: t |> Nx.devectorize(keep_names: false) |> Nx.to_binary()

  # Floats as their 64 bits (so -0.0 and 0.0 differ), NaN and the infinities as Nx's atoms.
  defp elements(t), do: t |> Nx.devectorize(keep_names: false) |> Nx.to_flat_list() |> Enum.map(&bits/1)

  defp bits(x) when is_float(x), do: <<x::float-64>>
  defp bits(%Complex{re: re, im: im}), do: {bits(re), bits(im)}
  defp bits(x), do: x
end
