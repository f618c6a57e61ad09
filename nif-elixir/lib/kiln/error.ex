defmodule Kiln.Error do
  @moduledoc """
  The error every Kiln call raises (ops) or returns in `{:error, %Kiln.Error{}}` (compile,
  devices).

  * `:code` - an atom, the lower-case name of a code of kiln-core's error table (`codes/0`:
    `:invalid_argument`, `:shape_mismatch`, `:device_lost`, ...); and `:nif_not_loaded` when
    the native library is missing or stale.
  * `:status` - the stable numeric code shared by every Kiln binding (docs/DESIGN.md), e.g. 3 for
    `:shape_mismatch`.
  * `:message` - a human message.

      iex> try do
      ...>   Kiln.add(Kiln.tensor([1.0, 2.0]), Kiln.tensor([1.0, 2.0, 3.0]))
      ...> rescue
      ...>   e in Kiln.Error -> {e.code, e.status}
      ...> end
      {:shape_mismatch, 3}
  """

  defexception code: :internal, status: 13, message: "internal error"

  # BEGIN GENERATED (kiln gen): kiln-core's error table (core/src/error.rs)
  @codes %{
    ok: 0,
    invalid_argument: 1,
    null_pointer: 2,
    shape_mismatch: 3,
    dtype_mismatch: 4,
    out_of_memory: 5,
    quota_exceeded: 6,
    shader: 7,
    device_lost: 8,
    no_adapter: 9,
    timeout: 10,
    unsupported: 11,
    panic: 12,
    internal: 13,
    compute_limit: 14
  }

  # END GENERATED (kiln gen)

  @doc "Every code atom with its numeric status, from kiln-core's error table."
  def codes, do: @codes

  @doc "The numeric status of a code atom (`:nif_not_loaded` counts as `:internal`)."
  def status_of(code), do: Map.get(@codes, code, 13)

  @doc false
  def new(code, message), do: %__MODULE__{code: code, status: status_of(code), message: message}

  @doc false
  # `{code_atom, status, message}` as the NIF sends it.
  def from_native({code, status, message}), do: %__MODULE__{code: code, status: status, message: message}

  @impl true
  def message(%__MODULE__{code: code, status: status, message: message}),
    do: "#{code} (#{status}): #{message}"
end
