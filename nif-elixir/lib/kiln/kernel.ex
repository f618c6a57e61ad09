defmodule Kiln.Kernel do
  @moduledoc """
  Hand-written WGSL compute kernels.

  The source is validated by naga (errors carry `line:column`) and reflected, so every dispatch
  is checked against the kernel's storage bindings (count, element type, size) before it
  reaches the GPU. Tensors are bound in binding order; `uniforms` is a binary for the one
  optional `var<uniform>` binding.

      iex> src = \"""
      ...> @group(0) @binding(0) var<storage, read> x: array<f32>;
      ...> @group(0) @binding(1) var<storage, read_write> y: array<f32>;
      ...> @compute @workgroup_size(64)
      ...> fn main(@builtin(global_invocation_id) id: vec3<u32>) {
      ...>   if (id.x < arrayLength(&x)) { y[id.x] = 2.0 * x[id.x]; }
      ...> }
      ...> \"""
      iex> k = Kiln.Kernel.compile!(src, "main")
      iex> x = Kiln.tensor([1.0, 2.0, 3.0])
      iex> y = Kiln.zeros({3}, type: {:f, 32})
      iex> :ok = Kiln.Kernel.dispatch(k, [x, y], {1, 1, 1})
      iex> Kiln.to_list(y)
      [2.0, 4.0, 6.0]

      iex> {:error, %Kiln.Error{code: :shader}} = Kiln.Kernel.compile("fn main( {", "main")
  """

  @enforce_keys [:ref, :entry, :workgroup_size, :bindings, :uniform_bytes]
  defstruct [:ref, :entry, :workgroup_size, :bindings, :uniform_bytes]

  @type t :: %__MODULE__{}

  @doc """
  Compiles `source` with entry point `entry`: `{:ok, kernel} | {:error, %Kiln.Error{}}`.
  Both must be UTF-8 strings (another binary is an `:invalid_argument` error). The compiler runs
  on a thread of its own with a large stack, so no source can overflow the scheduler's.
  """
  @spec compile(String.t(), String.t()) :: {:ok, t} | {:error, Kiln.Error.t()}
  def compile(source, entry) when is_binary(source) and is_binary(entry) do
    case Kiln.SafeNative.kernel_compile(source, entry) do
      {:ok, {ref, info}} ->
        {:ok,
         %__MODULE__{
           ref: ref,
           entry: info.entry,
           workgroup_size: info.workgroup_size,
           bindings: info.bindings,
           uniform_bytes: info.uniform_bytes
         }}

      {:error, e} ->
        {:error, Kiln.Error.from_native(e)}
    end
  end

  def compile(_source, _entry),
    do: {:error, Kiln.Error.new(:invalid_argument, "the source and the entry point must be strings")}

  @doc "Like `compile/2`, raising `Kiln.Error`."
  @spec compile!(String.t(), String.t()) :: t
  def compile!(source, entry) do
    case compile(source, entry) do
      {:ok, k} -> k
      {:error, e} -> raise e
    end
  end

  @doc """
  Queues `workgroups` (`{x, y, z}`, or an integer for `{x, 1, 1}`) workgroups of `kernel` with
  `tensors` bound in binding order. Returns `:ok`, raises `Kiln.Error` on bad input. The work
  runs asynchronously: reading any tensor waits for it.
  """
  @spec dispatch(t, [Kiln.Tensor.t()], tuple() | pos_integer(), binary()) :: :ok
  def dispatch(kernel, tensors, workgroups, uniforms \\ <<>>)

  def dispatch(%__MODULE__{ref: ref}, tensors, workgroups, uniforms)
      when is_list(tensors) and is_binary(uniforms) do
    unless proper?(tensors),
      do:
        raise(
          Kiln.Error.new(:invalid_argument, "dispatch expects a list of tensors, got #{inspect(tensors)}")
        )

    refs =
      Enum.map(tensors, fn
        %Kiln.Tensor{ref: r} ->
          r

        other ->
          raise Kiln.Error.new(:invalid_argument, "dispatch expects Kiln tensors, got #{inspect(other)}")
      end)

    wg =
      case workgroups do
        n when is_integer(n) ->
          {n, 1, 1}

        {x, y, z} when is_integer(x) and is_integer(y) and is_integer(z) ->
          {x, y, z}

        other ->
          raise Kiln.Error.new(:invalid_argument, "workgroups must be {x, y, z}, got #{inspect(other)}")
      end

    if Enum.any?(Tuple.to_list(wg), &(&1 < 0 or &1 > 0xFFFFFFFF)),
      do: raise(Kiln.Error.new(:invalid_argument, "workgroup counts must fit in u32, got #{inspect(wg)}"))

    Kiln.unwrap!(Kiln.SafeNative.kernel_dispatch(ref, refs, wg, uniforms))
    :ok
  end

  def dispatch(_kernel, _tensors, _workgroups, _uniforms),
    do: raise(Kiln.Error.new(:invalid_argument, "dispatch(kernel, [tensor], workgroups, uniforms_binary)"))

  defp proper?([]), do: true
  defp proper?([_ | t]), do: proper?(t)
  defp proper?(_), do: false
end
