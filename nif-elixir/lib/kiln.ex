# Written by hand where Elixir's idiom is not a plain reading of the op table: Nx's names and
# options (`axis: 0` for sort and the scans, `direction:`, `side:`, `type:`), numbers where a
# tensor goes, doctests, the runtime and tensor API. The two marked regions are kiln-gen's.
defmodule Kiln do
  @moduledoc """
  Kiln for Elixir: GPU tensors and WGSL kernels over kiln-core (WebGPU through wgpu), with Nx's
  conventions where they apply.

  Tensors are `%Kiln.Tensor{}` structs with a `shape` tuple and a `type`: `{:f, 32}`,
  `{:f, 16}`, `{:s, 32}`, `{:u, 32}` or `{:u, 8}`, which is kiln's bool (0 or 1, one byte an
  element, as Nx's predicates give): comparisons, logical ops, `is_nan/1` and friends, `all/2`
  and `any/2` return it. Every op returns a new tensor, so ops pipe; an op that fails raises
  `Kiln.Error` (with `:code`, `:status` and `:message`).

      iex> Kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
      ...> |> Kiln.matmul(Kiln.tensor([[1.0], [1.0]]))
      ...> |> Kiln.add(0.5)
      ...> |> Kiln.to_list()
      [[3.5], [7.5]]

      iex> Kiln.tensor([1, 2, 3], type: {:u, 32})
      #Kiln.Tensor<u32[3] [1, 2, 3]>

  GPU work runs on dirty schedulers: a long kernel never holds up a normal BEAM scheduler.
  Tensors are freed when garbage-collected, or at once with `free/1`.

  Floats that are not finite read back as `:nan`, `:infinity` and `:neg_infinity`, and those
  atoms are accepted wherever a number is.
  """

  # BEGIN GENERATED (kiln gen): kiln-core's unary and binary tables (core/src/ops/elementwise/table.rs)
  import Kernel, except: [abs: 1, ceil: 1, div: 2, floor: 1, max: 2, min: 2, round: 1, trunc: 1]

  # {Elixir name (Nx's where Nx has the op), kiln-core name, dtypes: :float, :numeric,
  # :bits (integers and {:u, 8}, the type kept) or :any (bool included, gives {:u, 8})}
  @unary_ops [
    {:negate, "neg", :numeric},
    {:abs, "abs", :numeric},
    {:exp, "exp", :float},
    {:log, "log", :float},
    {:sqrt, "sqrt", :float},
    {:rsqrt, "rsqrt", :float},
    {:sin, "sin", :float},
    {:cos, "cos", :float},
    {:tan, "tan", :float},
    {:tanh, "tanh", :float},
    {:sigmoid, "sigmoid", :float},
    {:relu, "relu", :numeric},
    {:gelu, "gelu", :float},
    {:gelu_tanh, "gelu_tanh", :float},
    {:silu, "silu", :float},
    {:floor, "floor", :numeric},
    {:asin, "asin", :float},
    {:acos, "acos", :float},
    {:atan, "atan", :float},
    {:sinh, "sinh", :float},
    {:cosh, "cosh", :float},
    {:asinh, "asinh", :float},
    {:acosh, "acosh", :float},
    {:atanh, "atanh", :float},
    {:log1p, "log1p", :float},
    {:expm1, "expm1", :float},
    {:log2, "log2", :float},
    {:log10, "log10", :float},
    {:ceil, "ceil", :numeric},
    {:trunc, "trunc", :numeric},
    {:round, "round", :numeric},
    {:sign, "sign", :numeric},
    {:reciprocal, "reciprocal", :float},
    {:square, "square", :numeric},
    {:logical_not, "logical_not", :any},
    {:is_nan, "isnan", :any},
    {:is_infinity, "isinf", :any},
    {:is_finite, "isfinite", :any},
    {:signbit, "signbit", :any},
    {:bitwise_not, "bitwise_invert", :bits}
  ]

  # {Elixir name (Nx's where Nx has the op), kiln-core name, gives {:u, 8} (bool)?}
  @binary_ops [
    {:add, "add", false},
    {:subtract, "sub", false},
    {:multiply, "mul", false},
    {:divide, "div", false},
    {:pow, "pow", false},
    {:maximum, "maximum", false},
    {:minimum, "minimum", false},
    {:equal, "eq", true},
    {:not_equal, "ne", true},
    {:less, "lt", true},
    {:less_equal, "le", true},
    {:greater, "gt", true},
    {:greater_equal, "ge", true},
    {:logical_and, "logical_and", true},
    {:logical_or, "logical_or", true},
    {:logical_xor, "logical_xor", true},
    {:atan2, "atan2", false},
    {:hypot, "hypot", false},
    {:logaddexp, "logaddexp", false},
    {:copysign, "copysign", false},
    {:nextafter, "nextafter", false},
    {:mod, "remainder", false},
    {:floor_div, "floor_divide", false},
    {:bitwise_and, "bitwise_and", false},
    {:bitwise_or, "bitwise_or", false},
    {:bitwise_xor, "bitwise_xor", false},
    {:left_shift, "bitwise_left_shift", false},
    {:right_shift, "bitwise_right_shift", false}
  ]

  # END GENERATED (kiln gen)

  alias Kiln.{Error, Tensor}
  # Every NIF call goes through Kiln.SafeNative: a bad argument is a Kiln.Error, never a bare
  # ArgumentError.
  alias Kiln.SafeNative, as: Native

  @type tensor :: Tensor.t()
  @type type :: Tensor.type()
  @type scalar :: number | :nan | :infinity | :neg_infinity

  # ---------------------------------------------------------------------------------------------
  # Types and conversion helpers

  # BEGIN GENERATED (kiln gen): kiln-core's dtype table (core/src/dtype.rs) in Nx's terms
  @native_of %{{:f, 32} => :f32, {:f, 16} => :f16, {:s, 32} => :i32, {:u, 32} => :u32, {:u, 8} => :bool}
  @type_of %{f32: {:f, 32}, f16: {:f, 16}, i32: {:s, 32}, u32: {:u, 32}, bool: {:u, 8}}
  @aliases %{
    f32: {:f, 32},
    f16: {:f, 16},
    s32: {:s, 32},
    i32: {:s, 32},
    u32: {:u, 32},
    u8: {:u, 8},
    bool: {:u, 8}
  }

  @doc """
  Normalizes a type: `{:f, 32}`, `{:f, 16}`, `{:s, 32}`, `{:u, 32}`, `{:u, 8}` or the atoms `:f32`,
  `:f16`, `:s32` (`:i32`), `:u32`, `:u8` (`:bool`). Anything else raises `Kiln.Error` with code
  `:invalid_argument`.

      iex> Kiln.normalize_type(:f16)
      {:f, 16}
  """
  def normalize_type(type) when is_map_key(@native_of, type), do: type
  def normalize_type(type) when is_map_key(@aliases, type), do: Map.fetch!(@aliases, type)

  def normalize_type(type),
    do:
      raise(
        Error.new(
          :invalid_argument,
          "unknown type #{inspect(type)} (supported: {:f, 32}, {:f, 16}, {:s, 32}, {:u, 32}, {:u, 8})"
        )
      )

  @doc false
  def type_name({:f, 32}), do: "f32"
  def type_name({:f, 16}), do: "f16"
  def type_name({:s, 32}), do: "s32"
  def type_name({:u, 32}), do: "u32"
  def type_name({:u, 8}), do: "u8"

  # END GENERATED (kiln gen)

  @specials [:nan, :infinity, :neg_infinity]
  defguardp is_scalar(x) when is_number(x) or x in [:nan, :infinity, :neg_infinity, true, false]

  defp native_type(type), do: Map.fetch!(@native_of, normalize_type(type))
  defp opt_native_type(nil), do: nil
  defp opt_native_type(type), do: native_type(type)

  @doc false
  def unwrap!({:ok, v}), do: v
  def unwrap!({:error, e}), do: raise(Error.from_native(e))

  defp wrap({ref, shape, dt}),
    do: %Tensor{ref: ref, shape: List.to_tuple(shape), type: Map.fetch!(@type_of, dt)}

  defp out(reply), do: reply |> unwrap!() |> wrap()

  # An op giving several tensors (a list from the NIF) as a tuple in their order.
  defp outs(reply), do: reply |> unwrap!() |> Enum.map(&wrap/1) |> List.to_tuple()

  defp ref!(%Tensor{ref: r}), do: r

  defp ref!(other),
    do: raise(Error.new(:invalid_argument, "expected a %Kiln.Tensor{}, got #{inspect(other)}"))

  defp opt_ref(nil), do: nil
  defp opt_ref(t), do: ref!(t)

  defp not_a_tensor!(other),
    do: raise(Error.new(:invalid_argument, "expected a %Kiln.Tensor{}, got #{inspect(other)}"))

  # Improper lists ([1 | 2]) are refused up front, before Enum sees them.
  defp proper?([]), do: true
  defp proper?([_ | t]), do: proper?(t)
  defp proper?(_), do: false

  defp proper_list!(l, what) do
    if proper?(l),
      do: l,
      else: raise(Error.new(:invalid_argument, "#{what} must be a list, got #{inspect(l)}"))
  end

  defp shape_list!(shape) when is_tuple(shape), do: shape_list!(Tuple.to_list(shape))

  defp shape_list!(shape) when is_list(shape) do
    if proper?(shape) and Enum.all?(shape, &(is_integer(&1) and &1 >= 0)) do
      shape
    else
      raise Error.new(:invalid_argument, "a shape is a tuple of non-negative integers, got #{inspect(shape)}")
    end
  end

  defp shape_list!(shape),
    do:
      raise(
        Error.new(:invalid_argument, "a shape is a tuple of non-negative integers, got #{inspect(shape)}")
      )

  defp int!(v, _what) when is_integer(v), do: v
  defp int!(v, what), do: raise(Error.new(:invalid_argument, "#{what} must be an integer, got #{inspect(v)}"))

  defp axes!(nil), do: nil
  defp axes!(a) when is_integer(a), do: [a]
  defp axes!(a) when is_list(a), do: a |> proper_list!("axes") |> Enum.map(&int!(&1, "an axis"))
  defp axes!(a), do: raise(Error.new(:invalid_argument, "axes must be a list of integers, got #{inspect(a)}"))

  defp opt_int!(nil, _what), do: nil
  defp opt_int!(v, what), do: int!(v, what)

  defp size!(v, _what) when is_integer(v) and v >= 0, do: v
  defp size!(_v, what), do: raise(Error.new(:invalid_argument, "#{what} must be a non-negative integer"))

  defp opt_float!(nil, _what), do: nil
  defp opt_float!(v, what), do: float!(v, what)

  defp float!(v, _what) when is_boolean(v), do: if(v, do: 1.0, else: 0.0)
  defp float!(v, what) when is_integer(v), do: num!(v, what)
  defp float!(v, _what) when is_scalar(v), do: v
  defp float!(v, what), do: raise(Error.new(:invalid_argument, "#{what} must be a number, got #{inspect(v)}"))

  # A number on its way to kiln-core, which alone decides whether it fits the tensor's type
  # (whole, finite and in range for an integer tensor; INVALID_ARGUMENT otherwise). Nothing is
  # truncated here: integers pass as they are, and those beyond 64 bits (which no integer type
  # takes) as the nearest float, or an error beyond the float range.
  @int_lo -0x8000000000000000
  @int_hi 0xFFFFFFFFFFFFFFFF
  defp num!(v, _what) when is_boolean(v), do: if(v, do: 1, else: 0)
  defp num!(v, _what) when is_integer(v) and v >= @int_lo and v <= @int_hi, do: v

  defp num!(v, what) when is_integer(v) do
    :erlang.float(v)
  rescue
    ArgumentError -> raise Error.new(:invalid_argument, "#{what} #{v} is too large for any Kiln type")
  end

  defp num!(v, _what), do: v

  defp pair!(v, _what) when is_integer(v) and v >= 0, do: {v, v}
  defp pair!([a, b], what), do: pair!({a, b}, what)
  defp pair!({a, b}, _what) when is_integer(a) and is_integer(b) and a >= 0 and b >= 0, do: {a, b}

  defp pair!(v, what),
    do: raise(Error.new(:invalid_argument, "#{what} must be an integer or a pair {h, w}, got #{inspect(v)}"))

  defp opts!(opts, defaults) when is_list(opts) do
    unless Keyword.keyword?(opts),
      do: raise(Error.new(:invalid_argument, "options must be a keyword list, got #{inspect(opts)}"))

    case Keyword.validate(opts, defaults) do
      {:ok, kw} ->
        kw

      {:error, bad} ->
        raise Error.new(
                :invalid_argument,
                "unknown options #{inspect(bad)} (known: #{inspect(Keyword.keys(defaults))})"
              )
    end
  end

  defp opts!(opts, _),
    do: raise(Error.new(:invalid_argument, "options must be a keyword list, got #{inspect(opts)}"))

  # ---------------------------------------------------------------------------------------------
  # Creation, upload and readback

  @doc """
  A tensor from a number or a (nested, rectangular) list. The type defaults to `{:f, 32}` when
  any element is a float (or `:nan`/`:infinity`/`:neg_infinity`), `{:s, 32}` otherwise.

      iex> t = Kiln.tensor([[1, 2, 3], [4, 5, 6]])
      iex> {Kiln.shape(t), Kiln.type(t)}
      {{2, 3}, {:s, 32}}

      iex> Kiln.tensor(2.5, type: {:f, 16}) |> Kiln.to_list()
      2.5
  """
  @spec tensor(scalar | list | tensor, keyword) :: tensor
  def tensor(data, opts \\ [])

  def tensor(%Tensor{} = t, opts) do
    kw = opts!(opts, type: nil)
    if kw[:type] && normalize_type(kw[:type]) != t.type, do: cast(t, kw[:type]), else: t
  end

  def tensor(data, opts) do
    kw = opts!(opts, type: nil)
    {shape, flat} = flatten(data)
    type = if kw[:type], do: normalize_type(kw[:type]), else: infer_type(flat)
    from_flat(flat, type, shape)
  end

  defp infer_type(flat) do
    cond do
      flat != [] and Enum.all?(flat, &is_boolean/1) -> {:u, 8}
      Enum.any?(flat, &(is_float(&1) or &1 in @specials)) -> {:f, 32}
      true -> {:s, 32}
    end
  end

  defp flatten(x) when is_scalar(x), do: {[], [x]}
  defp flatten([]), do: {[0], []}

  defp flatten(list) when is_list(list) do
    parts = list |> proper_list!("tensor data") |> Enum.map(&flatten/1)
    [{inner, _} | _] = parts

    unless Enum.all?(parts, fn {s, _} -> s == inner end),
      do:
        raise(
          Error.new(
            :shape_mismatch,
            "the nested list is not rectangular: #{inspect(Enum.map(parts, &elem(&1, 0)))}"
          )
        )

    {[length(list) | inner], Enum.flat_map(parts, &elem(&1, 1))}
  end

  defp flatten(other),
    do:
      raise(
        Error.new(
          :invalid_argument,
          "Kiln.tensor/2 takes numbers or nested lists of numbers, got #{inspect(other)}"
        )
      )

  defp from_flat(flat, {:f, 16}, shape) do
    # Rounded to f16 on the device (round to nearest even, overflow to infinity) as every
    # other binding does.
    from_flat(flat, {:f, 32}, shape) |> cast({:f, 16})
  end

  defp from_flat(flat, type, shape) do
    bin = for x <- flat, into: <<>>, do: encode(x, type)
    out(Native.from_binary(bin, native_type(type), shape))
  end

  @f32_max 3.4028235677973366e38
  defp encode(:nan, {:f, 32}), do: <<0x7FC00000::32-little>>
  defp encode(:infinity, {:f, 32}), do: <<0x7F800000::32-little>>
  defp encode(:neg_infinity, {:f, 32}), do: <<0xFF800000::32-little>>
  defp encode(x, {:f, 32}) when x >= @f32_max, do: encode(:infinity, {:f, 32})
  defp encode(x, {:f, 32}) when x <= -@f32_max, do: encode(:neg_infinity, {:f, 32})
  defp encode(x, {:f, 32}), do: <<x::float-32-little>>
  defp encode(x, {:s, 32}) when is_float(x), do: encode(trunc(x), {:s, 32})

  defp encode(x, {:s, 32}) when is_integer(x) and x >= -2_147_483_648 and x <= 2_147_483_647,
    do: <<x::signed-32-little>>

  # Bool: true and any value other than 0 is 1 (NaN included, as a cast to bool gives).
  defp encode(x, {:u, 8}) when x in [false, 0, +0.0, -0.0], do: <<0>>
  defp encode(x, {:u, 8}) when is_scalar(x), do: <<1>>
  defp encode(x, type) when is_boolean(x), do: encode(if(x, do: 1, else: 0), type)
  defp encode(x, {:u, 32}) when is_float(x), do: encode(trunc(x), {:u, 32})
  defp encode(x, {:u, 32}) when is_integer(x) and x >= 0 and x <= 4_294_967_295, do: <<x::unsigned-32-little>>

  defp encode(x, type),
    do: raise(Error.new(:invalid_argument, "#{inspect(x)} does not fit in #{type_name(type)}"))

  @doc """
  A tensor from the little-endian bytes of `type` elements in row-major order. The binary's
  size must match the shape.

      iex> Kiln.from_binary(<<1::32-little, 2::32-little>>, {:u, 32}, {2}) |> Kiln.to_list()
      [1, 2]

      iex> Kiln.from_binary(<<1, 2, 3>>, {:f, 32}, {1})
      ** (Kiln.Error) invalid_argument (1): 3 bytes given for shape [1] of f32, which needs 4
  """
  @spec from_binary(binary, type, tuple | list) :: tensor
  def from_binary(binary, type, shape) when is_binary(binary) do
    out(Native.from_binary(binary, native_type(type), shape_list!(shape)))
  end

  def from_binary(other, _type, _shape),
    do: raise(Error.new(:invalid_argument, "from_binary/3 takes a binary, got #{inspect(other)}"))

  @doc """
  The tensor's bytes (little-endian, row-major). Waits for the GPU on a dirty scheduler.

      iex> Kiln.tensor([1, 2], type: {:s, 32}) |> Kiln.to_binary()
      <<1, 0, 0, 0, 2, 0, 0, 0>>
  """
  @spec to_binary(tensor) :: binary
  def to_binary(t), do: unwrap!(Native.to_binary(ref!(t)))

  @doc """
  The values as a nested list (a number for a rank-0 tensor).

      iex> Kiln.tensor([[1.5, 2.0], [3.0, 4.0]]) |> Kiln.to_list()
      [[1.5, 2.0], [3.0, 4.0]]
  """
  @spec to_list(tensor) :: list | scalar
  def to_list(%Tensor{shape: shape} = t), do: nest(to_flat_list(t), Tuple.to_list(shape))
  def to_list(other), do: not_a_tensor!(other)

  @doc "The single value of a tensor with one element."
  def to_number(%Tensor{} = t) do
    case to_flat_list(t) do
      [x] ->
        x

      vals ->
        raise Error.new(:shape_mismatch, "to_number/1 needs one element, the tensor has #{length(vals)}")
    end
  end

  def to_number(other), do: not_a_tensor!(other)

  @doc false
  def to_flat_list(%Tensor{type: type} = t), do: decode(to_binary(t), type)
  def to_flat_list(other), do: not_a_tensor!(other)

  defp decode(bin, {:f, 32}), do: for(<<x::binary-4 <- bin>>, do: dec_f32(x))
  defp decode(bin, {:f, 16}), do: for(<<x::binary-2 <- bin>>, do: dec_f16(x))
  defp decode(bin, {:s, 32}), do: for(<<x::signed-32-little <- bin>>, do: x)
  defp decode(bin, {:u, 32}), do: for(<<x::unsigned-32-little <- bin>>, do: x)
  defp decode(bin, {:u, 8}), do: for(<<x::8 <- bin>>, do: x)

  defp dec_f32(<<x::float-32-little>>), do: x
  defp dec_f32(<<bits::32-little>>), do: special(Bitwise.band(bits, 0x7FFFFF), Bitwise.bsr(bits, 31))
  defp dec_f16(<<x::float-16-little>>), do: x
  defp dec_f16(<<bits::16-little>>), do: special(Bitwise.band(bits, 0x3FF), Bitwise.bsr(bits, 15))

  defp special(0, 0), do: :infinity
  defp special(0, 1), do: :neg_infinity
  defp special(_, _), do: :nan

  defp nest([x], []), do: x
  defp nest(flat, [_]), do: flat

  defp nest(flat, [d | rest]) do
    inner = Enum.product(rest)

    if inner == 0,
      do: List.duplicate(nest([], rest), d),
      else: flat |> Enum.chunk_every(inner) |> Enum.map(&nest(&1, rest))
  end

  @doc false
  def format_number(x, _type) when is_integer(x), do: Integer.to_string(x)
  def format_number(x, _type) when is_atom(x), do: Atom.to_string(x)

  def format_number(x, {:f, bits}) do
    # The shortest decimal that reads back as the same f32 / f16 value.
    digits = if bits == 32, do: 0..8, else: 0..4

    Enum.find_value(digits, fn d ->
      {y, ""} = Float.parse(:erlang.float_to_binary(x, [{:scientific, d}]))
      if same_float?(x, y, bits), do: :erlang.float_to_binary(y, [:short])
    end) || :erlang.float_to_binary(x, [:short])
  end

  defp same_float?(x, y, 32), do: <<x::float-32>> == <<y::float-32>>

  defp same_float?(x, y, 16),
    do:
      (try do
         <<x::float-16>> == <<y::float-16>>
       rescue
         _ -> false
       end)

  @doc "The shape tuple.\n\n    iex> Kiln.shape(Kiln.tensor([[1, 2, 3]]))\n    {1, 3}\n"
  def shape(%Tensor{shape: s}), do: s
  def shape(other), do: not_a_tensor!(other)
  @doc "The type tuple.\n\n    iex> Kiln.type(Kiln.tensor([1.0]))\n    {:f, 32}\n"
  def type(%Tensor{type: t}), do: t
  def type(other), do: not_a_tensor!(other)
  @doc "The number of dimensions."
  def rank(%Tensor{shape: s}), do: tuple_size(s)
  def rank(other), do: not_a_tensor!(other)
  @doc "The number of elements."
  def size(%Tensor{shape: s}), do: s |> Tuple.to_list() |> Enum.product()
  def size(other), do: not_a_tensor!(other)

  @doc """
  Frees the tensor's GPU memory now, instead of at garbage collection. Any later use of the
  tensor raises `Kiln.Error` (`:invalid_argument`). Views made by `reshape/2` share the memory
  and keep it alive. Returns `:ok`.

      iex> t = Kiln.tensor([1.0, 2.0])
      iex> Kiln.free(t)
      :ok
      iex> Kiln.to_list(t)
      ** (Kiln.Error) invalid_argument (1): the tensor was freed with Kiln.free/1 and cannot be used
  """
  def free(t) do
    unwrap!(Native.free(ref!(t)))
    :ok
  end

  @doc "An uninitialised tensor of `shape` (`type:` defaults to `{:f, 32}`)."
  def empty(shape, opts \\ []), do: creation(:empty, shape, opts)

  defp creation(fun, shape, opts) do
    kw = opts!(opts, type: {:f, 32})
    out(apply(Native, fun, [shape_list!(shape), native_type(kw[:type])]))
  end

  @doc """
  `start, start + step, …` below `stop`, numpy's `arange`. The type defaults to `{:s, 32}` when
  the three are integers, `{:f, 32}` otherwise.

      iex> Kiln.arange(0, 5) |> Kiln.to_list()
      [0, 1, 2, 3, 4]
      iex> Kiln.arange(1.0, 2.0, step: 0.25) |> Kiln.to_list()
      [1.0, 1.25, 1.5, 1.75]
  """
  def arange(start, stop, opts \\ []) do
    kw = opts!(opts, step: 1, type: nil)
    step = kw[:step]

    for v <- [start, stop, step],
        not is_number(v),
        do: raise(Error.new(:invalid_argument, "arange takes numbers, got #{inspect(v)}"))

    type = kw[:type] || if(Enum.all?([start, stop, step], &is_integer/1), do: {:s, 32}, else: {:f, 32})
    out(Native.arange(num!(start, "start"), num!(stop, "stop"), num!(step, "step"), native_type(type)))
  end

  @doc "Overwrites every element of `t` with `value` (in place) and returns `t`."
  def fill(t, value) do
    unwrap!(Native.fill(ref!(t), float!(value, "the fill value")))
    t
  end

  @doc "A new tensor with the same contents (a GPU-side copy)."
  def copy(t), do: out(Native.copy(ref!(t)))

  # ---------------------------------------------------------------------------------------------
  # Elementwise

  @unary Enum.map(@unary_ops, fn {_, core, _} -> String.to_atom(core) end)

  for {name, core, rule} <- @unary_ops do
    @doc """
    Elementwise `#{name}` (kiln-core's `#{core}`). #{case rule do
      :float -> "It needs a float tensor."
      :numeric -> "It needs a float or an integer tensor (not `{:u, 8}`, bool)."
      :bits -> "It needs an integer tensor or `{:u, 8}` (bool, where it is logical)."
      :any -> "It takes any tensor, `{:u, 8}` (bool) included, and gives `{:u, 8}`."
    end}
    """
    def unquote(name)(t), do: out(Native.unary(unquote(core), ref!(t)))

    if Atom.to_string(name) != core do
      @doc "`#{name}/1` under kiln-core's name."
      def unquote(String.to_atom(core))(t), do: unquote(name)(t)
    end
  end

  @doc "Applies the unary op named by `op`, kiln-core's name (one of #{inspect(@unary)})."
  def unary(op, t) when op in @unary, do: apply(__MODULE__, op, [t])
  def unary(op, _t), do: raise(Error.new(:invalid_argument, "unknown unary op #{inspect(op)}"))

  @binary Enum.map(@binary_ops, fn {_, core, _} -> String.to_atom(core) end)

  for {name, core, cmp?} <- @binary_ops do
    @doc """
    Elementwise `#{name}` (kiln-core's `#{core}`) with numpy broadcasting#{if cmp?, do: ", giving `{:u, 8}` (bool: 0 or 1)", else: ""}.
    Either side may be a number, which takes the tensor's type (kiln-core refuses NaN, fractions
    and values out of range for an integer tensor with `:invalid_argument`); two tensors must have
    the same type.#{if core == "div", do: "\n\nOn integer tensors `divide` is floor division, numpy's `//`: the quotient rounded\ntoward negative infinity (`div(-7, 2) == -4`), and `x div 0 == 0` (Nx's `divide` would give\nfloats). Float tensors divide as IEEE 754 does (`1.0 / 0.0` is `:infinity`).", else: ""}#{if core in ["remainder", "floor_divide"], do: "\n\nFloored, as `Integer.mod/2` and `Integer.floor_div/2` (numpy's `remainder` and `floor_divide`):\nthe remainder takes the divisor's sign (`Nx.remainder` takes the dividend's), and an integer\n`x` by 0 gives 0.", else: ""}
    """
    def unquote(name)(a, b), do: binary_op(unquote(core), a, b)

    if Atom.to_string(name) != core do
      @doc "`#{name}/2` under kiln-core's name."
      def unquote(String.to_atom(core))(a, b), do: binary_op(unquote(core), a, b)
    end

    @doc "`#{core}(t, s)` with a number `s` (kiln-core's `#{core}_scalar`)."
    def unquote(:"#{core}_scalar")(t, s) when is_scalar(s), do: binary_op(unquote(core), t, s)
  end

  @doc "Applies the binary op named by `op`, kiln-core's name (one of #{inspect(@binary)})."
  def binary(op, a, b) when op in @binary, do: binary_op(Atom.to_string(op), a, b)
  def binary(op, _a, _b), do: raise(Error.new(:invalid_argument, "unknown binary op #{inspect(op)}"))

  defp binary_op(op, %Tensor{} = a, %Tensor{} = b), do: out(Native.binary(op, a.ref, b.ref))

  defp binary_op(op, %Tensor{} = a, s) when is_scalar(s),
    do: out(Native.binary_scalar(op, a.ref, num!(s, "the scalar"), false))

  defp binary_op(op, s, %Tensor{} = b) when is_scalar(s),
    do: out(Native.binary_scalar(op, b.ref, num!(s, "the scalar"), true))

  defp binary_op(op, a, b) when is_scalar(a) and is_scalar(b),
    do: binary_op(op, tensor(a, type: infer_type([a, b])), b)

  defp binary_op(op, a, b),
    do:
      raise(
        Error.new(:invalid_argument, "#{op} takes tensors or numbers, got #{inspect(a)} and #{inspect(b)}")
      )

  @doc """
  `cond ? on_true : on_false` elementwise, broadcasting all three; `cond` is `{:u, 8}` (bool)
  or any type true where non-zero. A number branch takes the other branch's type. (kiln-core's `where_`; `select/3` is
  Nx's name.)

      iex> Kiln.where(Kiln.tensor([1, 0, 2]), Kiln.tensor([1.0, 2.0, 3.0]), 0.0) |> Kiln.to_list()
      [1.0, 0.0, 3.0]
  """
  def where(cond, on_true, on_false) do
    {a, b} =
      case {on_true, on_false} do
        # full/3, not tensor/2: kiln-core checks the number against the type (no truncation).
        {%Tensor{} = a, s} when is_scalar(s) -> {a, full({}, s, type: a.type)}
        {s, %Tensor{} = b} when is_scalar(s) -> {full({}, s, type: b.type), b}
        pair -> pair
      end

    out(Native.where_(ref!(cond), ref!(a), ref!(b)))
  end

  @doc """
  `t` limited to `[min, max]` elementwise (Nx's `clip/3`, the Array API's `clip`): a NaN in `t`
  or a bound gives NaN. Either bound may be `nil` (no bound), a number (of `t`'s type) or a
  tensor of `t`'s type that broadcasts to `t`'s shape.
  """
  def clip(t, min, max) do
    bound = fn
      nil -> nil
      s when is_scalar(s) -> ref!(full({}, s, type: t.type))
      b -> ref!(b)
    end

    out(Native.clip(ref!(t), bound.(min), bound.(max)))
  end

  @doc "Nx's name for `where/3`."
  def select(cond, on_true, on_false), do: where(cond, on_true, on_false)

  @doc "Nx's name for `cast/2`."
  def as_type(t, type), do: cast(t, type)

  # A seed (the generated random functions' `seed:`).
  defp seed!(s) when is_integer(s) and s >= 0 and s < 0x10000000000000000, do: s

  defp seed!(s),
    do: raise(Error.new(:invalid_argument, "a seed is an integer in 0..2^64-1, got #{inspect(s)}"))

  # ---------------------------------------------------------------------------------------------
  # Reductions

  @doc "Nx's name for `var/2`."
  def variance(t, opts \\ []), do: var(t, opts)

  # ---------------------------------------------------------------------------------------------
  # Searching, sorting and sets

  @doc """
  `t` sorted along `axis:` (default 0, as Nx) in `direction: :asc` (default) or `:desc`.
  Stable; NaNs sort last ascending and first descending (the exact reverse order, equal values
  still in index order); -0.0 and 0.0 are equal.
  """
  def sort(t, opts \\ []) do
    kw = opts!(opts, axis: 0, direction: :asc)
    out(Native.sort(ref!(t), int!(kw[:axis], "axis"), descending!(kw[:direction])))
  end

  @doc """
  The indices (`{:s, 32}`) that sort `t` along `axis:` (default 0) in `direction:` `:asc` or
  `:desc` (as `sort/2`). Always stable; `stable:` is accepted as Nx's option.
  """
  def argsort(t, opts \\ []) do
    kw = opts!(opts, axis: 0, direction: :asc, stable: true)
    out(Native.argsort(ref!(t), int!(kw[:axis], "axis"), descending!(kw[:direction])))
  end

  defp descending!(:asc), do: false
  defp descending!(:desc), do: true

  defp descending!(d),
    do: raise(Error.new(:invalid_argument, "direction must be :asc or :desc, got #{inspect(d)}"))

  @doc """
  For each value of `values`, the index (`{:s, 32}`) at which it would be inserted into the
  sorted 1-D `sorted` (same type) to keep it sorted: before equal elements (`side: :left`, the
  default) or after them (`side: :right`). NaNs sort last, as in `sort/2`.
  """
  def searchsorted(sorted, values, opts \\ []) do
    kw = opts!(opts, side: :left)

    right =
      case kw[:side] do
        :left -> false
        :right -> true
        s -> raise Error.new(:invalid_argument, "side must be :left or :right, got #{inspect(s)}")
      end

    out(Native.searchsorted(ref!(sorted), ref!(values), right))
  end

  @doc """
  A tuple with one `{:s, 32}` tensor per dimension of `t`: the coordinates of its non-zero
  elements in row-major order (numpy's `nonzero`). Their number is read back from the GPU.
  """
  def nonzero(t), do: outs(Native.nonzero(ref!(t)))

  @doc """
  The distinct values of `t` (flattened, sorted) as `%{values:, indices:, inverse_indices:,
  counts:}`: the first index of each value, the index into `values` of every element (`t`'s
  shape) and how often each occurs (`{:s, 32}`). -0.0 and 0.0 are one value; every NaN is
  distinct (the Array API's rule). Their number is read back from the GPU.
  """
  def unique_all(t) do
    [v, i, inv, c] = Native.unique_all(ref!(t)) |> unwrap!() |> Enum.map(&wrap/1)
    %{values: v, indices: i, inverse_indices: inv, counts: c}
  end

  @doc """
  Nx's `dot/4`: contracts the axes `axes_a` of `a` with `axes_b` of `b` pairwise; the result has
  `a`'s other axes then `b`'s (one matmul on the GPU).
  """
  def dot(a, axes_a, b, axes_b) when is_list(axes_a) and is_list(axes_b),
    do: out(Native.tensordot(ref!(a), ref!(b), -1, axes!(axes_a), axes!(axes_b)))

  @doc """
  numpy's `tensordot`: `axes:` an integer n (the last n axes of `a` with the first n of `b`,
  default 2) or a tuple `{axes_a, axes_b}` of lists.
  """
  def tensordot(a, b, opts \\ []) do
    case opts!(opts, axes: 2)[:axes] do
      n when is_integer(n) and n >= 0 ->
        out(Native.tensordot(ref!(a), ref!(b), n, [], []))

      {la, lb} when is_list(la) and is_list(lb) ->
        dot(a, la, b, lb)

      other ->
        raise(Error.new(:invalid_argument, "axes: an integer >= 0 or {list, list}, got #{inspect(other)}"))
    end
  end

  # ---------------------------------------------------------------------------------------------
  # Normalisation

  # ---------------------------------------------------------------------------------------------
  # Movement

  @doc """
  Same data, new shape (no copy). One dimension may be `:auto` (or -1).

      iex> Kiln.arange(0, 6) |> Kiln.reshape({2, :auto}) |> Kiln.to_list()
      [[0, 1, 2], [3, 4, 5]]
  """
  def reshape(t, shape) do
    dims = if is_tuple(shape), do: Tuple.to_list(shape), else: shape

    unless is_list(dims),
      do: raise(Error.new(:invalid_argument, "reshape takes a shape tuple, got #{inspect(shape)}"))

    dims =
      dims
      |> proper_list!("a shape")
      |> Enum.map(fn
        :auto -> -1
        d -> int!(d, "a dimension")
      end)

    out(Native.reshape(ref!(t), dims))
  end

  @doc "Reorders the axes: `permute(t, [1, 0])` is a 2-D transpose."
  def permute(t, axes) when is_list(axes), do: out(Native.permute(ref!(t), axes!(axes)))
  def permute(t, axes) when is_tuple(axes), do: permute(t, Tuple.to_list(axes))

  def permute(_t, axes),
    do: raise(Error.new(:invalid_argument, "permute takes a list of axes, got #{inspect(axes)}"))

  @doc "Swaps axes `a0` and `a1` (defaults: the last two)."
  def transpose(t, a0 \\ -2, a1 \\ -1), do: out(Native.transpose(ref!(t), int!(a0, "axis"), int!(a1, "axis")))

  @doc "Nx's name for `concat/2`."
  def concatenate(tensors, opts \\ []), do: concat(tensors, opts)

  @doc """
  `t[start:stop:step]` along `axis`, numpy's clamping of `start` and `stop` (negative from the
  end); `step >= 1`.
  """
  def slice(t, axis, start, stop, step \\ 1),
    do:
      out(
        Native.slice(
          ref!(t),
          int!(axis, "axis"),
          int!(start, "start"),
          int!(stop, "stop"),
          int!(step, "step")
        )
      )

  # ---------------------------------------------------------------------------------------------
  # Neural-network ops

  # ---------------------------------------------------------------------------------------------
  # Quantized weights: GGUF blocks (`:q4_0`, `:q4_1`, `:q8_0`, `:q5_0`, `:q5_1`, and the K
  # formats `:q2_k` .. `:q6_k` of 256-value super-blocks) kept quantized on the GPU as a
  # `{:u, 32}` tensor of the raw bytes, zero-padded to whole words.

  @quant_formats [:q4_0, :q4_1, :q8_0, :q5_0, :q5_1, :q2_k, :q3_k, :q4_k, :q5_k, :q6_k]

  defp quant_format!(f) when f in @quant_formats, do: Atom.to_string(f)

  defp quant_format!(f),
    do:
      raise(
        Error.new(:invalid_argument, "format must be one of #{inspect(@quant_formats)}, got #{inspect(f)}")
      )

  @doc """
  Uploads raw GGUF blocks (a binary, e.g. a slice of a .gguf file) of a `rows` x `cols` matrix
  in `format` as the tensor the quant functions read.
  """
  def quant_from_bytes(binary, format, rows, cols) when is_binary(binary) do
    out(Native.quant_from_bytes(binary, quant_format!(format), int!(rows, "rows"), int!(cols, "cols")))
  end

  def quant_from_bytes(other, _format, _rows, _cols),
    do: raise(Error.new(:invalid_argument, "quant_from_bytes/4 takes a binary, got #{inspect(other)}"))

  # ---------------------------------------------------------------------------------------------
  # The plain ops of kiln-core's op table whose row names an Elixir function: generated in Nx's
  # form (arguments without a default positional, the others keyword options with the row's
  # defaults; keepdims is `keep_axes:` / `keep_axis:`, an optional dtype `type:`).

  # BEGIN GENERATED (kiln gen): the plain ops of kiln-core's op table (core/src/ops/table.rs)
  @doc """
  A tensor of zeros (kiln-core's `zeros`; dtypes: any).

  Options:

    * `type:` (default `{:f, 32}`): the dtype of the result
  """
  def zeros(shape, opts \\ []) do
    kw = opts!(opts, type: {:f, 32})
    out(Native.zeros(shape_list!(shape), native_type(kw[:type])))
  end

  @doc """
  A tensor of ones (kiln-core's `ones`; dtypes: any).

  Options:

    * `type:` (default `{:f, 32}`): the dtype of the result
  """
  def ones(shape, opts \\ []) do
    kw = opts!(opts, type: {:f, 32})
    out(Native.ones(shape_list!(shape), native_type(kw[:type])))
  end

  @doc """
  A tensor filled with `value` (kiln-core's `full`; dtypes: any).

  Options:

    * `type:` (default `{:f, 32}`): the dtype of the result
  """
  def full(shape, value, opts \\ []) do
    kw = opts!(opts, type: {:f, 32})
    out(Native.full(shape_list!(shape), native_type(kw[:type]), float!(value, "value")))
  end

  @doc """
  Uniform numbers in [low, high), the same on every device (kiln-core's `random_uniform`; dtypes: float).

  Options:

    * `type:` (default `{:f, 32}`): the dtype of the result
    * `seed:` (default `0`): the seed (same seed, same numbers)
    * `low:` (default `0.0`): the lower bound
    * `high:` (default `1.0`): the upper bound, not included
  """
  def random_uniform(shape, opts \\ []) do
    kw = opts!(opts, type: {:f, 32}, seed: 0, low: 0.0, high: 1.0)

    out(
      Native.random_uniform(
        shape_list!(shape),
        native_type(kw[:type]),
        seed!(kw[:seed]),
        float!(kw[:low], "low"),
        float!(kw[:high], "high")
      )
    )
  end

  @doc """
  Normal numbers, the same on every device (kiln-core's `random_normal`; dtypes: float).

  Options:

    * `type:` (default `{:f, 32}`): the dtype of the result
    * `seed:` (default `0`): the seed (same seed, same numbers)
    * `mean:` (default `0.0`): the mean
    * `std:` (default `1.0`): the standard deviation
  """
  def random_normal(shape, opts \\ []) do
    kw = opts!(opts, type: {:f, 32}, seed: 0, mean: 0.0, std: 1.0)

    out(
      Native.random_normal(
        shape_list!(shape),
        native_type(kw[:type]),
        seed!(kw[:seed]),
        float!(kw[:mean], "mean"),
        float!(kw[:std], "std")
      )
    )
  end

  @doc """
  Conversion to `dtype` (float to int truncates, saturating; to bool: non-zero is true; from bool: 0 or 1) (kiln-core's `cast`; dtypes: any, bool included).
  """
  def cast(x, dtype), do: out(Native.cast(ref!(x), native_type(dtype)))

  @doc """
  Numpy matmul (1-D operands promoted, batch dims broadcast) (kiln-core's `matmul`; dtypes: any).
  """
  def matmul(a, b), do: out(Native.matmul(ref!(a), ref!(b)))

  @doc """
  Sum over axes (kiln-core's `sum`; dtypes: any).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def sum(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.sum(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Mean over axes (kiln-core's `mean`; dtypes: float).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def mean(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.mean(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Maximum over axes (kiln-core's `max`; dtypes: any, bool included).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def max(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.max(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Minimum over axes (kiln-core's `min`; dtypes: any, bool included).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def min(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.min(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Whether every element over axes is true (non-zero); true over an empty axis (kiln-core's `all`; dtypes: any, bool included (gives bool)).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def all(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.all(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Whether some element over axes is true (non-zero); false over an empty axis (kiln-core's `any`; dtypes: any, bool included (gives bool)).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def any(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.any(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  Variance over axes (kiln-core's `var`; dtypes: float).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
    * `ddof:` (default `0`): delta degrees of freedom (0: population, 1: sample)
  """
  def var(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false, ddof: 0)
    out(Native.var(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true, size!(kw[:ddof], "ddof")))
  end

  @doc """
  Index (i32) of the largest element (kiln-core's `argmax`; dtypes: any, bool included).

  Options:

    * `axis:` (default `nil`): the axis (None: the flattened tensor)
    * `keep_axis:` (default `false`): keep the reduced axes with size 1
  """
  def argmax(x, opts \\ []) do
    kw = opts!(opts, axis: nil, keep_axis: false)
    out(Native.argmax(ref!(x), opt_int!(kw[:axis], "axis"), kw[:keep_axis] == true))
  end

  @doc """
  Index (i32) of the smallest element (kiln-core's `argmin`; dtypes: any, bool included).

  Options:

    * `axis:` (default `nil`): the axis (None: the flattened tensor)
    * `keep_axis:` (default `false`): keep the reduced axes with size 1
  """
  def argmin(x, opts \\ []) do
    kw = opts!(opts, axis: nil, keep_axis: false)
    out(Native.argmin(ref!(x), opt_int!(kw[:axis], "axis"), kw[:keep_axis] == true))
  end

  @doc """
  Softmax along an axis (kiln-core's `softmax`; dtypes: float).

  Options:

    * `axis:` (default `-1`): the axis (negative counts from the end)
  """
  def softmax(x, opts \\ []) do
    kw = opts!(opts, axis: -1)
    out(Native.softmax(ref!(x), int!(kw[:axis], "axis")))
  end

  @doc """
  Log-softmax along an axis (kiln-core's `log_softmax`; dtypes: float).

  Options:

    * `axis:` (default `-1`): the axis (negative counts from the end)
  """
  def log_softmax(x, opts \\ []) do
    kw = opts!(opts, axis: -1)
    out(Native.log_softmax(ref!(x), int!(kw[:axis], "axis")))
  end

  @doc """
  Layer normalization over the last axis (kiln-core's `layer_norm`; dtypes: float).

  Options:

    * `weight:` (default `nil`): the scale (None: 1)
    * `bias:` (default `nil`): the shift (None: 0)
    * `eps:` (default `1.0e-5`): added to the variance
  """
  def layer_norm(x, opts \\ []) do
    kw = opts!(opts, weight: nil, bias: nil, eps: 1.0e-5)
    out(Native.layer_norm(ref!(x), opt_ref(kw[:weight]), opt_ref(kw[:bias]), float!(kw[:eps], "eps")))
  end

  @doc """
  RMS normalization over the last axis (kiln-core's `rms_norm`; dtypes: float).

  Options:

    * `weight:` (default `nil`): the scale (None: 1)
    * `eps:` (default `1.0e-6`): added to the mean square
  """
  def rms_norm(x, opts \\ []) do
    kw = opts!(opts, weight: nil, eps: 1.0e-6)
    out(Native.rms_norm(ref!(x), opt_ref(kw[:weight]), float!(kw[:eps], "eps")))
  end

  @doc """
  Batch normalization (inference) of [N, C, ...] with stats [C] (kiln-core's `batch_norm`; dtypes: float).

  Options:

    * `weight:` (default `nil`): the scale (None: 1)
    * `bias:` (default `nil`): the shift (None: 0)
    * `eps:` (default `1.0e-5`): added to the variance
  """
  def batch_norm(x, mean, var, opts \\ []) do
    kw = opts!(opts, weight: nil, bias: nil, eps: 1.0e-5)

    out(
      Native.batch_norm(
        ref!(x),
        ref!(mean),
        ref!(var),
        opt_ref(kw[:weight]),
        opt_ref(kw[:bias]),
        float!(kw[:eps], "eps")
      )
    )
  end

  @doc """
  2-D convolution, NCHW (kiln-core's `conv2d`; dtypes: any).

  Options:

    * `bias:` (default `nil`): added per output channel (None: none)
    * `stride:` (default `1`): the step (height, width)
    * `padding:` (default `0`): zeros added on each side (height, width)
    * `dilation:` (default `1`): the spacing of the filter taps (height, width)
    * `groups:` (default `1`): the channel groups
  """
  def conv2d(x, w, opts \\ []) do
    kw = opts!(opts, bias: nil, stride: 1, padding: 0, dilation: 1, groups: 1)

    out(
      Native.conv2d(
        ref!(x),
        ref!(w),
        opt_ref(kw[:bias]),
        pair!(kw[:stride], "stride"),
        pair!(kw[:padding], "padding"),
        pair!(kw[:dilation], "dilation"),
        size!(kw[:groups], "groups")
      )
    )
  end

  @doc """
  Max pooling, NCHW (kiln-core's `max_pool2d`; dtypes: any).

  Options:

    * `stride:` (default `kernel`): the step (height, width)
    * `padding:` (default `0`): zeros added on each side (height, width)
  """
  def max_pool2d(x, kernel, opts \\ []) do
    kw = opts!(opts, stride: nil, padding: 0)

    out(
      Native.max_pool2d(
        ref!(x),
        pair!(kernel, "kernel"),
        pair!(kw[:stride] || kernel, "stride"),
        pair!(kw[:padding], "padding")
      )
    )
  end

  @doc """
  Average pooling (padding counts), NCHW (kiln-core's `avg_pool2d`; dtypes: any).

  Options:

    * `stride:` (default `kernel`): the step (height, width)
    * `padding:` (default `0`): zeros added on each side (height, width)
  """
  def avg_pool2d(x, kernel, opts \\ []) do
    kw = opts!(opts, stride: nil, padding: 0)

    out(
      Native.avg_pool2d(
        ref!(x),
        pair!(kernel, "kernel"),
        pair!(kw[:stride] || kernel, "stride"),
        pair!(kw[:padding], "padding")
      )
    )
  end

  @doc """
  Tensors joined along an axis (kiln-core's `concat`; dtypes: any, bool included).

  Options:

    * `axis:` (default `0`): the axis (negative counts from the end)
  """
  def concat(tensors, opts \\ []) do
    kw = opts!(opts, axis: 0)
    out(Native.concat(Enum.map(proper_list!(tensors, "tensors"), &ref!/1), int!(kw[:axis], "axis")))
  end

  @doc """
  Entries picked by 1-D indices (numpy take; negative i32 indices count from the end) (kiln-core's `index_select`; dtypes: any, bool included).
  """
  def index_select(x, axis, indices), do: out(Native.index_select(ref!(x), int!(axis, "axis"), ref!(indices)))

  @doc """
  Torch.gather along an axis (numpy take_along_axis; negative i32 indices count from the end) (kiln-core's `gather`; dtypes: any, bool included).
  """
  def gather(x, axis, index), do: out(Native.gather(ref!(x), int!(axis, "axis"), ref!(index)))

  @doc """
  Rows of weight [V, D] picked by ids (ids outside [0, V), negative ones included: zeros) (kiln-core's `embedding`; dtypes: any, bool included).
  """
  def embedding(weight, ids), do: out(Native.embedding(ref!(weight), ref!(ids)))

  @doc """
  Rotary position embedding (rotate-half) (kiln-core's `rope`; dtypes: float).

  Options:

    * `pos_offset:` (default `0`): the position of the first row
    * `base:` (default `10000.0`): the frequency base
  """
  def rope(x, opts \\ []) do
    kw = opts!(opts, pos_offset: 0, base: 10000.0)
    out(Native.rope(ref!(x), size!(kw[:pos_offset], "pos_offset"), float!(kw[:base], "base")))
  end

  @doc """
  Scaled dot-product attention (kiln-core's `attention`; dtypes: float).

  Options:

    * `causal:` (default `false`): mask key j > query i
    * `scale:` (default `nil`): the score scale (None: 1/sqrt(D))
  """
  def attention(q, k, v, opts \\ []) do
    kw = opts!(opts, causal: false, scale: nil)
    out(Native.attention(ref!(q), ref!(k), ref!(v), kw[:causal] == true, opt_float!(kw[:scale], "scale")))
  end

  @doc """
  A float [rows, cols] quantized as ggml's reference quantizer does (kiln-core's `quantize`; dtypes: float).
  """
  def quantize(x, format), do: out(Native.quantize(ref!(x), quant_format!(format)))

  @doc """
  F32 [rows, cols] from a quantized matrix (kiln-core's `dequantize`; dtypes: u32 (quantized)).
  """
  def dequantize(w, format, rows, cols),
    do: out(Native.dequantize(ref!(w), quant_format!(format), size!(rows, "rows"), size!(cols, "cols")))

  @doc """
  X [..., K] times Wᵀ for W quantized [N, K], accumulated in f32 (kiln-core's `quant_matmul`; dtypes: float x, u32 (quantized) w).
  """
  def quant_matmul(x, w, format, n),
    do: out(Native.quant_matmul(ref!(x), ref!(w), quant_format!(format), size!(n, "n")))

  @doc """
  Rows of a quantized table [V, D] picked by ids (out of range: zeros) (kiln-core's `quant_embedding`; dtypes: u32 (quantized) w, i32/u32 ids).
  """
  def quant_embedding(w, format, d, ids),
    do: out(Native.quant_embedding(ref!(w), quant_format!(format), size!(d, "d"), ref!(ids)))

  @doc """
  The k largest (or smallest) elements along an axis and their i32 indices, sorted (ties: the lower index first; NaN is the largest, as in sort) (kiln-core's `topk`; dtypes: any, bool included).

  Options:

    * `axis:` (default `-1`): the axis (negative counts from the end)
    * `largest:` (default `true`): the largest (else the smallest)
  """
  def top_k(x, k, opts \\ []) do
    kw = opts!(opts, axis: -1, largest: true)
    outs(Native.topk(ref!(x), size!(k, "k"), int!(kw[:axis], "axis"), kw[:largest] == true))
  end

  @doc "kiln-core's name for `top_k/3`."
  def topk(x, k, opts \\ []), do: top_k(x, k, opts)

  @doc """
  The number (i32) of non-zero elements over axes (kiln-core's `count_nonzero`; dtypes: any, bool included).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
  """
  def count_nonzero(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false)
    out(Native.count_nonzero(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true))
  end

  @doc """
  (values, counts) of the distinct values (kiln-core's `unique_counts`; dtypes: any, bool included).
  """
  def unique_counts(x), do: outs(Native.unique_counts(ref!(x)))

  @doc """
  (values, inverse_indices) of the distinct values (kiln-core's `unique_inverse`; dtypes: any, bool included).
  """
  def unique_inverse(x), do: outs(Native.unique_inverse(ref!(x)))

  @doc """
  The distinct values, sorted (each NaN kept) (kiln-core's `unique_values`; dtypes: any, bool included).
  """
  def unique_values(x), do: out(Native.unique_values(ref!(x)))

  @doc """
  Whether each element of x1 is in x2 (bool; NaN never is) (kiln-core's `isin`; dtypes: any, bool included (one dtype)).

  Options:

    * `invert:` (default `false`): give the negation
  """
  def isin(x1, x2, opts \\ []) do
    kw = opts!(opts, invert: false)
    out(Native.isin(ref!(x1), ref!(x2), kw[:invert] == true))
  end

  @doc """
  Running sum along an axis (an axis is required past 1-D; integers wrap) (kiln-core's `cumulative_sum`; dtypes: any).

  Options:

    * `axis:` (default `0`): the axis (None only for a 1-D input)
    * `type:` (default `nil`): the dtype of the result (None: x's)
    * `include_initial:` (default `false`): start with the identity (the result one longer)
  """
  def cumulative_sum(x, opts \\ []) do
    kw = opts!(opts, axis: 0, type: nil, include_initial: false)

    out(
      Native.cumulative_sum(
        ref!(x),
        opt_int!(kw[:axis], "axis"),
        opt_native_type(kw[:type]),
        kw[:include_initial] == true
      )
    )
  end

  @doc """
  Running product along an axis (an axis is required past 1-D; integers wrap) (kiln-core's `cumulative_prod`; dtypes: any).

  Options:

    * `axis:` (default `0`): the axis (None only for a 1-D input)
    * `type:` (default `nil`): the dtype of the result (None: x's)
    * `include_initial:` (default `false`): start with the identity (the result one longer)
  """
  def cumulative_product(x, opts \\ []) do
    kw = opts!(opts, axis: 0, type: nil, include_initial: false)

    out(
      Native.cumulative_prod(
        ref!(x),
        opt_int!(kw[:axis], "axis"),
        opt_native_type(kw[:type]),
        kw[:include_initial] == true
      )
    )
  end

  @doc "kiln-core's name for `cumulative_product/2`."
  def cumulative_prod(x, opts \\ []), do: cumulative_product(x, opts)

  @doc """
  Product over axes (integers wrap; 1 over an empty axis) (kiln-core's `prod`; dtypes: any).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
    * `type:` (default `nil`): the dtype of the result (None: x's)
  """
  def product(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false, type: nil)
    out(Native.prod(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true, opt_native_type(kw[:type])))
  end

  @doc "kiln-core's name for `product/2`."
  def prod(x, opts \\ []), do: product(x, opts)

  @doc """
  Standard deviation over axes, sqrt(var) (kiln-core's `std`; dtypes: float).

  Options:

    * `axes:` (default `nil`): the axes to reduce (None: every axis)
    * `keep_axes:` (default `false`): keep the reduced axes with size 1
    * `ddof:` (default `0`): delta degrees of freedom (0: population, 1: sample)
  """
  def standard_deviation(x, opts \\ []) do
    kw = opts!(opts, axes: nil, keep_axes: false, ddof: 0)
    out(Native.std(ref!(x), axes!(kw[:axes]), kw[:keep_axes] == true, size!(kw[:ddof], "ddof")))
  end

  @doc "kiln-core's name for `standard_deviation/2`."
  def std(x, opts \\ []), do: standard_deviation(x, opts)

  @doc """
  N-th forward difference along an axis (x[1:] - x[:-1], n times) (kiln-core's `diff`; dtypes: any).

  Options:

    * `axis:` (default `-1`): the axis (negative counts from the end)
    * `n:` (default `1`): how many times to difference
    * `prepend:` (default `nil`): joined before x along the axis
    * `append:` (default `nil`): joined after x along the axis
  """
  def diff(x, opts \\ []) do
    kw = opts!(opts, axis: -1, n: 1, prepend: nil, append: nil)

    out(
      Native.diff(
        ref!(x),
        int!(kw[:axis], "axis"),
        size!(kw[:n], "n"),
        opt_ref(kw[:prepend]),
        opt_ref(kw[:append])
      )
    )
  end

  @doc """
  Dot product of the vectors along an axis, with broadcasting (sum(x1 * x2, axis)) (kiln-core's `vecdot`; dtypes: any).

  Options:

    * `axis:` (default `-1`): the axis of the vectors
  """
  def vecdot(x1, x2, opts \\ []) do
    kw = opts!(opts, axis: -1)
    out(Native.vecdot(ref!(x1), ref!(x2), int!(kw[:axis], "axis")))
  end

  # END GENERATED (kiln gen)

  # ---------------------------------------------------------------------------------------------
  # Runtime

  @doc """
  The GPU adapters, best first, the default one marked `chosen: true`:
  `{:ok, [map]} | {:error, %Kiln.Error{}}`.
  """
  def devices do
    case Native.devices() do
      {:ok, list} -> {:ok, list}
      {:error, e} -> {:error, Error.from_native(e)}
    end
  end

  @doc "Like `devices/0`, raising `Kiln.Error`."
  def devices! do
    case devices() do
      {:ok, list} -> list
      {:error, e} -> raise e
    end
  end

  @doc "Waits until all queued GPU work is done."
  def synchronize, do: unwrap!(Native.synchronize())

  @doc """
  Destroys the process's GPU devices and starts over: tensors and kernels made before raise
  `Kiln.Error` with code `:device_lost` from then on, and the next call that needs a device
  creates a fresh one. The way out of a `:timeout` or any other stuck state. Returns `:ok`.
  """
  def reset_devices do
    unwrap!(Native.reset_devices())
    :ok
  end

  @doc "Memory counters of the default device (bytes allocated, in use, peak, pooled; live buffers)."
  def memory_stats, do: unwrap!(Native.memory_stats())

  @doc "Gives the pooled GPU buffers back to the driver."
  def empty_cache, do: unwrap!(Native.empty_cache())

  @doc """
  Runs `fun` with `session` current for the calling process (`Kiln.Session.with/2`): tensors
  and kernels it creates belong to the session and count against its limits.
  """
  def with_session(session, fun), do: Kiln.Session.with(session, fun)

  @doc """
  kiln-core's metrics in Prometheus' text exposition format (0.0.4): device memory, dispatches
  and errors, and one sample per open session, ready for a `/metrics` endpoint.
  """
  def metrics_text, do: unwrap!(Native.metrics_text())

  @doc """
  Runs `fun` under a per-op GPU-time profile of the whole process (every dispatch gets a timed
  pass of its own while it runs, so profiled work is slower) and returns `{result, profile}`:
  a map with `:rows` (one per op: `:op`, `:calls`, `:timed`, `:total_s`, `:mean_s`, `:share`,
  most time first), `:clock` (`"gpu_timestamps"`, or `"wall_clock"` where the adapter has no
  timestamp queries), `:total_s`, `:wall_s` and `:text`, the table to print with `IO.puts/1`.
  One profile at a time per process: a second raises `:invalid_argument`. The profile is
  stopped even when `fun` raises.

      iex> {_, p} = Kiln.profile(fn -> Kiln.add(Kiln.tensor([1.0, 2.0]), 1.0) |> Kiln.to_list() end)
      iex> Enum.any?(p.rows, &(&1.op == "elementwise:add"))
      true
  """
  def profile(fun) when is_function(fun, 0) do
    unwrap!(Native.profile_start())

    try do
      result = fun.()
      {result, unwrap!(Native.profile_stop())}
    after
      if Native.profile_running(), do: Native.profile_stop()
    end
  end

  @doc "Whether the default device supports `{:f, 16}`."
  def f16_supported?, do: unwrap!(Native.has_f16())
end
