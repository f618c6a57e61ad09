defmodule Kiln.Tensor do
  @moduledoc """
  A tensor on the GPU: a NIF resource holding kiln-core's tensor, with its `shape` (a tuple)
  and `type` (`{:f, 32}`, `{:f, 16}`, `{:s, 32}` or `{:u, 32}`).

  The GPU memory is released when the struct is garbage-collected, or at once with
  `Kiln.free/1`. `inspect/1` shows the type, the shape and the leading values (it reads the
  tensor back from the GPU).
  """

  @enforce_keys [:ref, :shape, :type]
  defstruct [:ref, :shape, :type]

  @type type :: {:f, 32} | {:f, 16} | {:s, 32} | {:u, 32}
  @type t :: %__MODULE__{ref: reference(), shape: tuple(), type: type}
end

defimpl Inspect, for: Kiln.Tensor do
  @limit 10

  def inspect(%Kiln.Tensor{} = t, _opts) do
    head = Kiln.type_name(t.type) <> Enum.map_join(Tuple.to_list(t.shape), "", &"[#{&1}]")

    body =
      if Kiln.Native.status() != :ok or Kiln.Native.is_freed(t.ref) do
        if Kiln.Native.status() == :ok, do: "(freed)", else: "(NIF not loaded)"
      else
        vals = Kiln.to_flat_list(t)
        shown = vals |> Enum.take(@limit) |> Enum.map_join(", ", &Kiln.format_number(&1, t.type))
        more = if length(vals) > @limit, do: ", ...", else: ""
        "[" <> shown <> more <> "]"
      end

    "#Kiln.Tensor<" <> head <> " " <> body <> ">"
  end
end
