defmodule Kiln.Backend do
  @moduledoc """
  An `Nx.Backend` on Kiln's GPU tensors: `Nx.default_backend(Kiln.Backend)` (or
  `backend: Kiln.Backend` on a tensor) runs Nx code, `Nx.Defn` with its default evaluator
  included, through kiln-core's kernels.

      Nx.default_backend(Kiln.Backend)
      Nx.tensor([[1.0, 2.0], [3.0, 4.0]]) |> Nx.dot(Nx.tensor([1.0, 1.0])) |> Nx.to_list()
      #=> [3.0, 7.0]

  Each `Nx.Tensor` holds a `%Kiln.Tensor{}` (its `data` is a `%Kiln.Backend{ref: kiln_tensor}`).
  Callbacks that Kiln's ops serve run on the GPU; the others go through `Nx.BinaryBackend`
  (the tensors are read back, computed on the host, and the result uploaded again), so every
  Nx function works, some on the host. `fallbacks/0` lists the latter.

  ## Types

  Kiln's GPU types are f32, f16, s32, u32 (and a bool). An Nx type maps to one of them for
  storage; the `Nx.Tensor` keeps its own type, and readback converts back:

  | Nx type | on the GPU | rule |
  |---|---|---|
  | f32, f16, s32, u32 | the same | |
  | s64, u64 | s32, u32 when every value fits, else none (host) | a tensor with a value beyond 32 bits is held on the host (as the types below, exact 64-bit results); on the GPU integer arithmetic wraps at 32 bits, not 64; integer constants wrap to their type's width, as Nx's do |
  | s8, s16, u8, u16 | s32, u32 | results are wrapped to the type's width after each op, as Nx does (predicates give u8 0/1) |
  | f64 | f32 with `config :kiln, f64: :f32` (`Application.put_env(:kiln, :f64, :f32)`), else none (host) | opted in: values beyond f32's range raise `ArgumentError` at upload, and the precision is f32's; otherwise as the row below, with f64's full precision |
  | bf16, f8, f8_e4m3fn, c64, c128, s2, s4, u2, u4 | none: held on the host | the tensor is still a `Kiln.Backend` one (`data: %Kiln.Backend{ref: nil, host: bytes}`), and every callback that touches one (as input or output) runs on `Nx.BinaryBackend`, whose results it gives bit for bit; a result of a GPU type (`Nx.abs` of a complex tensor) goes to the GPU |

  Float-to-integer `as_type` truncates as Nx does, gives 0 for NaN and the type's limits for the
  infinities, and wraps negative values into unsigned types (Nx's rules); finite values beyond
  32 bits saturate (Nx.BinaryBackend wraps them). To s64/u64 it runs on the host, and so do the
  ops whose s64/u64 results may leave 32 bits (add, multiply, sum, shifts left, ...): exact.

  ## Callbacks

  | callback | where |
  |---|---|
  | `constant`, `from_binary`, `iota`, `eye`, `to_binary`, `inspect`, `backend_copy`, `backend_transfer`, `backend_deallocate` | GPU (8- and 16-bit integers widened and 64-bit ones range-checked on the GPU at upload; f64 and readback conversions on the host) |
  | elementwise `add`, `subtract`, `multiply`, `pow`, `divide`, `atan2`, `min`, `max`, bitwise ops and shifts; integer `quotient` and `remainder` (a zero divisor gives 0) | GPU (float `remainder`: host) |
  | comparisons, `logical_and/or/xor/not`, `is_nan`, `is_infinity` | GPU |
  | unary math: `exp`, `expm1`, `log`, `log1p`, `sigmoid`, trig and hyperbolic, `sqrt`, `rsqrt`, `erf`, `erfc`, `erf_inv`, `cbrt` (WGSL kernels of this module's own), `abs`, `negate`, `sign` (-0.0 kept), `ceil`, `floor`, `round` (half away from zero), `bitwise_not`, `population_count`, `count_leading_zeros` (WGSL builtins) | GPU |
  | `sum`, `product`, `reduce_max`, `reduce_min`, `all`, `any` (axes, `keep_axes`) | GPU (empty input: host) |
  | `argmax`, `argmin` (NaN is the extreme; of several NaNs the first, numpy's rule, where `Nx.BinaryBackend` gives the last) | GPU (`tie_break: :high`: host) |
  | `dot` (contraction and batch axes) | GPU: permute, reshape, one (batched) matmul |
  | `reshape`, `squeeze`, `transpose`, `broadcast`, `slice`, `put_slice`, `concatenate`, `stack`, `pad` (no interior padding), `reverse`, `select`, `clip`, `as_type` | GPU |
  | `sort`, `argsort`, `cumulative_sum`, `cumulative_product`, `take`, `take_along_axis` | GPU |
  | `conv` (2-D, NCHW, no input dilation or batch groups, identity permutations, symmetric padding) | GPU (`Kiln.conv2d/3`); other convs: host |
  | `window_max`, `window_sum` (and `window_min` on floats) over the last two axes of a rank-4 tensor, without dilation, padding at most half the window | GPU (`Kiln.max_pool2d/3`, `Kiln.avg_pool2d/3` times the window); other windows: host |
  | `gather` (index rows over any `axes:`), `to_batched` (sliced on the GPU as the stream is read), `bitcast` between f32, s32 and u32 (a WGSL kernel) | GPU (other bitcasts: host) |
  | `indexed_add`, `indexed_put` (repeated indices add up / the last one wins, as Nx's) | GPU: a WGSL scatter kernel of this module's own, one invocation per column of the update rows, so no atomics |
  | `real`, `imag`, `conjugate`, `reduce`, `window_product`, `window_reduce`, `window_scatter_max`, `window_scatter_min`, `triangular_solve`, `fft`, `ifft` | host (`Nx.BinaryBackend`): `fallbacks/0` |
  | `lu`, `qr`, `eigh`, `svd`, `cholesky`, `solve`, `determinant` (optional callbacks) | host: Nx's own implementations on `Nx.BinaryBackend` tensors (loops of small ops, far faster there than one GPU dispatch each) |
  | optional callbacks not listed (`cumulative_min/max`, `top_k`, `all_close`, `fft2`, ...) | Nx's default implementations, built from the callbacks above |

  Every host call emits the `:telemetry` event `[:kiln, :backend, :host]` with the callback's
  name in its metadata (`%{callback: :window_sum}`).

  A GPU callback whose kernel refuses the dtype (`Kiln.Error` `:dtype_mismatch` or
  `:unsupported`, e.g. f16 on an adapter without shader-f16) falls back to the host for that
  call. Other errors (shapes, device) raise `Kiln.Error`.
  """

  @behaviour Nx.Backend

  # `ref`: the Kiln tensor on the GPU; or, for a type Kiln's GPU types cannot hold (see
  # "Types"), `ref: nil` and `host`: the tensor's bytes in Nx's layout, on the host.
  @enforce_keys [:ref]
  defstruct [:ref, :host]

  alias Nx.Tensor, as: T

  # ---------------------------------------------------------------------------------------------
  # Types

  @doc """
  The Kiln type that holds an Nx type on the GPU (see the module doc), or raises
  `ArgumentError` for one Kiln cannot hold.
  """
  def storage_type({:f, 32} = t), do: t
  def storage_type({:f, 16} = t), do: t

  def storage_type({:f, 64}) do
    if Application.get_env(:kiln, :f64) == :f32 do
      {:f, 32}
    else
      raise ArgumentError,
            "Kiln.Backend has no f64 (WebGPU has no portable float64): use {:f, 32}, or opt in to " <>
              "holding f64 as f32 with Application.put_env(:kiln, :f64, :f32)"
    end
  end

  def storage_type({:s, b}) when b in [8, 16, 32, 64], do: {:s, 32}
  def storage_type({:u, b}) when b in [8, 16, 32, 64], do: {:u, 32}

  def storage_type(type),
    do:
      raise(
        ArgumentError,
        "Kiln.Backend cannot hold #{Kernel.inspect(type)} (GPU types: f32, f16, s32, u32; s8..s64 and " <>
          "u8..u64 are held as 32-bit): use Nx.BinaryBackend for it"
      )

  defp supported?(type) do
    storage_type(type)
    true
  rescue
    ArgumentError -> false
  end

  # ---------------------------------------------------------------------------------------------
  # Wrapping, unwrapping, conversion

  defp put(%T{} = out, %Kiln.Tensor{} = k), do: %{out | data: %__MODULE__{ref: k}}
  defp put_host(%T{} = out, bin) when is_bitstring(bin), do: %{out | data: %__MODULE__{ref: nil, host: bin}}

  # The Kiln tensor of `t` in its storage type (a tensor of another backend is uploaded).
  defp kt(%T{data: %__MODULE__{ref: nil, host: bin}} = t), do: upload(bin, t.type, t.shape)
  defp kt(%T{data: %__MODULE__{ref: r}}), do: r
  defp kt(%T{} = t), do: upload(Nx.to_binary(t), t.type, t.shape)

  # The Kiln tensor of `t` converted to the storage type of `type` (values as Nx's as_type
  # gives them for the conversions Nx's type promotion makes: widening, int to float).
  defp kt(%T{} = t, type) do
    k = kt(t)
    want = storage_type(type)
    if k.type == want, do: k, else: Kiln.cast(k, want)
  end

  # Narrow and 64-bit integers are widened or narrowed on the GPU (the bytes go up as 32-bit
  # words; shifts and masks take each element out), which is ~50x faster than an Elixir loop
  # over the binary; f64 is converted on the host (Kiln has no 64-bit float to read it with).
  defp upload(bin, {k, b} = type, shape) when k in [:s, :u] and b in [8, 16] do
    per = div(32, b)
    n = div(byte_size(bin), div(b, 8))
    pad = rem(4 - rem(byte_size(bin), 4), 4)
    m = div(byte_size(bin) + pad, 4)
    st = storage_type(type)
    words = Kiln.from_binary(bin <> :binary.copy(<<0>>, pad), st, {m, 1})
    shifts = for j <- 0..(per - 1), do: b * j

    elems =
      if k == :u do
        words |> Kiln.right_shift(Kiln.tensor(shifts, type: st)) |> Kiln.bitwise_and(Bitwise.<<<(1, b) - 1)
      else
        # Each element moved to the word's top, then an arithmetic shift back extends its sign.
        lefts = Enum.map(shifts, &(32 - b - &1))
        words |> Kiln.left_shift(Kiln.tensor(lefts, type: st)) |> Kiln.right_shift(32 - b)
      end

    elems |> Kiln.reshape({m * per}) |> Kiln.slice(0, 0, n) |> Kiln.reshape(shape)
  end

  # s64/u64: the two 32-bit halves of each element go up; every high half must be the sign
  # (s64) or zero (u64) of its low half, checked on the GPU with one read back of a bool.
  # (store/2 keeps a tensor whose values do not fit on the host instead; this raises.)
  defp upload(bin, {k, 64} = type, shape) when k in [:s, :u] do
    case upload64(bin, type, shape) do
      {:ok, lo} -> lo
      # The error path only: find the first value that does not fit, for the message.
      :no_fit -> to_storage(bin, type)
    end
  end

  defp upload(bin, type, shape) do
    Kiln.from_binary(to_storage(bin, type), storage_type(type), shape)
  end

  defp upload64(bin, {k, 64} = type, shape) do
    n = div(byte_size(bin), 8)
    halves = Kiln.from_binary(bin, storage_type(type), {n, 2})
    lo = Kiln.slice(halves, 1, 0, 1)
    hi = Kiln.slice(halves, 1, 1, 2)
    want_hi = if k == :s, do: Kiln.right_shift(lo, 31), else: 0

    if n > 0 and Kiln.all(Kiln.equal(hi, want_hi)) |> Kiln.to_number() == 0,
      do: :no_fit,
      else: {:ok, Kiln.reshape(lo, shape)}
  end

  # An Nx tensor's bytes as a Kiln.Backend tensor: on the GPU, or on the host for a type the GPU
  # cannot hold and for s64/u64 values beyond the 32 bits they are held in there.
  defp store(%T{type: type, shape: shape} = out, bin) do
    cond do
      not supported?(type) ->
        put_host(out, bin)

      type in [{:s, 64}, {:u, 64}] ->
        case upload64(bin, type, shape) do
          {:ok, k} -> put(out, k)
          :no_fit -> put_host(out, bin)
        end

      true ->
        put(out, upload(bin, type, shape))
    end
  end

  # Host conversion of an Nx binary (native endianness, as Nx's) to the storage type's bytes.
  defp to_storage(bin, {:s, 64}), do: for(<<x::signed-64-native <- bin>>, into: <<>>, do: fit32!(x, :s, 64))
  defp to_storage(bin, {:u, 64}), do: for(<<x::unsigned-64-native <- bin>>, into: <<>>, do: fit32!(x, :u, 64))

  defp to_storage(bin, {:s, 16}),
    do: for(<<x::signed-16-native <- bin>>, into: <<>>, do: <<x::signed-32-native>>)

  defp to_storage(bin, {:s, 8}), do: for(<<x::signed-8 <- bin>>, into: <<>>, do: <<x::signed-32-native>>)
  defp to_storage(bin, {:u, 16}), do: for(<<x::unsigned-16-native <- bin>>, into: <<>>, do: <<x::32-native>>)
  defp to_storage(bin, {:u, 8}), do: for(<<x::8 <- bin>>, into: <<>>, do: <<x::32-native>>)
  defp to_storage(bin, {:f, 64}), do: for(<<x::binary-8 <- bin>>, into: <<>>, do: f64_to_f32!(x))
  defp to_storage(bin, _same), do: bin

  defp fits32?(bin, :s), do: Enum.all?(for(<<x::signed-64-native <- bin>>, do: x in -0x80000000..0x7FFFFFFF))
  defp fits32?(bin, :u), do: Enum.all?(for(<<x::unsigned-64-native <- bin>>, do: x <= 0xFFFFFFFF))

  defp fit32!(x, :s, _) when x >= -0x80000000 and x <= 0x7FFFFFFF, do: <<x::signed-32-native>>
  defp fit32!(x, :u, _) when x >= 0 and x <= 0xFFFFFFFF, do: <<x::unsigned-32-native>>

  defp fit32!(x, s, b),
    do:
      raise(
        ArgumentError,
        "Kiln.Backend holds {#{Kernel.inspect(s)}, #{b}} as 32-bit on the GPU and #{x} does not fit " <>
          "(#{if s == :s, do: "-2^31..2^31-1", else: "0..2^32-1"}): refusing rather than wrapping"
      )

  @f32_max 3.4028234663852886e38
  defp f64_to_f32!(<<x::float-64-native>>) when abs(x) <= @f32_max, do: <<x::float-32-native>>

  defp f64_to_f32!(<<x::float-64-native>>),
    do: raise(ArgumentError, "the f64 value #{x} is beyond f32's range (Kiln.Backend holds f64 as f32)")

  # NaN and the infinities (Erlang floats cannot hold them): same sign, NaN stays NaN.
  defp f64_to_f32!(<<bits::64-native>>) do
    import Bitwise
    sign = bits >>> 63
    nan? = (bits &&& 0xFFFFFFFFFFFFF) != 0
    <<sign <<< 31 ||| 0x7F800000 ||| if(nan?, do: 0x400000, else: 0)::32-native>>
  end

  # Storage bytes back to the Nx type's bytes.
  defp from_storage(bin, {:s, b}) when b in [8, 16, 64],
    do: for(<<x::signed-32-native <- bin>>, into: <<>>, do: <<x::signed-size(b)-native>>)

  defp from_storage(bin, {:u, b}) when b in [8, 16, 64],
    do: for(<<x::unsigned-32-native <- bin>>, into: <<>>, do: <<x::unsigned-size(b)-native>>)

  defp from_storage(bin, {:f, 64}), do: for(<<x::binary-4 <- bin>>, into: <<>>, do: f32_to_f64(x))
  defp from_storage(bin, _same), do: bin

  defp f32_to_f64(<<x::float-32-native>>), do: <<x::float-64-native>>

  defp f32_to_f64(<<bits::32-native>>) do
    import Bitwise
    sign = bits >>> 31
    nan? = (bits &&& 0x7FFFFF) != 0
    <<sign <<< 63 ||| 0x7FF0000000000000 ||| if(nan?, do: 0x8000000000000, else: 0)::64-native>>
  end

  # Narrow integer types live in 32 bits: wrap to the type's width after an op that may leave
  # the range (Nx's integer arithmetic wraps).
  defp fit(k, {:s, b}) when b in [8, 16] do
    sh = 32 - b
    k |> Kiln.left_shift(sh) |> Kiln.right_shift(sh)
  end

  defp fit(k, {:u, 8}), do: Kiln.bitwise_and(k, 0xFF)
  defp fit(k, {:u, 16}), do: Kiln.bitwise_and(k, 0xFFFF)
  defp fit(k, _), do: k

  # Kiln's bool (a predicate's result) as an Nx u8.
  defp from_bool(k), do: Kiln.cast(k, {:u, 32})

  # ---------------------------------------------------------------------------------------------
  # The host path: the tensors go to Nx.BinaryBackend, it computes, the result comes back. The
  # first argument is always the output template (its data is not read).

  # Each host call emits the telemetry event [:kiln, :backend, :host] (metadata: callback), so
  # that a user (or a test) can see which calls leave the GPU.
  # Nx.BinaryBackend runs with itself as the default backend: a function it calls back (reduce's,
  # window_reduce's) then makes its constants on the host, as that backend expects. An optional
  # callback that Nx.BinaryBackend lacks (take, cumulative_sum, ...) is the Nx (or Nx.LinAlg)
  # function of that name on the host tensors: Nx's own implementation from the required
  # callbacks.
  defp via_binary(name, [out | args]) do
    :telemetry.execute([:kiln, :backend, :host], %{}, %{callback: name})
    args = Enum.map(args, &to_host/1)

    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      cond do
        function_exported?(Nx.BinaryBackend, name, length(args) + 1) ->
          apply(Nx.BinaryBackend, name, [out | args])

        function_exported?(Nx, name, length(args)) ->
          apply(Nx, name, args)

        true ->
          apply(Nx.LinAlg, name, args)
      end
    end)
    |> from_host()
  end

  defp to_host(%T{data: %__MODULE__{ref: nil, host: bin}} = t), do: %{t | data: %Nx.BinaryBackend{state: bin}}

  defp to_host(%T{data: %__MODULE__{}} = t),
    do: %{t | data: %Nx.BinaryBackend{state: to_binary(t, Nx.size(t))}}

  defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)

  defp to_host(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&to_host/1) |> List.to_tuple()

  defp to_host(other), do: other

  defp from_host(%T{data: %Nx.BinaryBackend{state: bin}} = t), do: store(t, bin)

  defp from_host(%Stream{} = stream), do: Stream.map(stream, &from_host/1)

  defp from_host(list) when is_list(list), do: Enum.map(list, &from_host/1)

  defp from_host(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&from_host/1) |> List.to_tuple()

  defp from_host(other), do: other

  # Runs a GPU implementation; a dtype its kernel refuses sends the call to the host instead.
  defp gpu(name, args, fun) do
    fun.()
  rescue
    e in Kiln.Error ->
      if e.code in [:dtype_mismatch, :unsupported],
        do: via_binary(name, args),
        else: reraise(e, __STACKTRACE__)
  end

  # ---------------------------------------------------------------------------------------------
  # Creation and transfer

  @impl true
  def init(opts) do
    if opts != [], do: raise(ArgumentError, "Kiln.Backend takes no options, got #{Kernel.inspect(opts)}")
    []
  end

  @impl true
  # An integer wraps to the type's width, as Nx's does (Nx.tensor(-1, type: :u32) is 2^32-1); an
  # s64/u64 one that does not fit in 32 bits then makes a host-held tensor.
  def constant(%T{type: {k, b} = type} = out, number, opts) when k in [:s, :u] and is_integer(number) do
    wrapped = wrap_int(number, k, b)
    fits? = if k == :s, do: wrapped in -0x80000000..0x7FFFFFFF, else: wrapped in 0..0xFFFFFFFF

    if fits?,
      do: put(out, Kiln.full(out.shape, wrapped, type: storage_type(type))),
      else: via_binary(:constant, [out, number, opts])
  end

  def constant(%T{type: type, shape: shape} = out, number, _opts) do
    st = storage_type(type)
    if is_struct(number, Complex), do: raise(ArgumentError, "Kiln.Backend has no complex numbers")
    put(out, Kiln.full(shape, number, type: st) |> fit(type))
  end

  defp wrap_int(number, :s, b) do
    <<v::signed-size(b)>> = <<number::size(b)>>
    v
  end

  defp wrap_int(number, :u, b) do
    <<v::size(b)>> = <<number::size(b)>>
    v
  end

  @impl true
  def from_binary(%T{} = out, binary, _opts), do: store(out, binary)

  @impl true
  def to_binary(%T{data: %__MODULE__{ref: nil}} = t, limit), do: Nx.BinaryBackend.to_binary(to_host(t), limit)

  def to_binary(%T{type: type} = t, limit) do
    k = kt(t)
    # (The stored elements: a vectorized tensor's Nx.size/1 counts one entry's.)
    n = Kiln.size(k)
    # Only the first `limit` elements cross the bus (inspect asks for a few of a large tensor).
    k = if limit < n, do: k |> Kiln.reshape({n}) |> Kiln.slice(0, 0, limit), else: k
    k |> Kiln.to_binary() |> from_storage(type)
  end

  @impl true
  def inspect(%T{data: %__MODULE__{ref: nil}} = t, inspect_opts),
    do: Nx.BinaryBackend.inspect(to_host(t), inspect_opts)

  def inspect(%T{} = t, inspect_opts) do
    n = Kiln.size(kt(t))
    limit = if inspect_opts.limit == :infinity, do: n, else: min(n, inspect_opts.limit + 1)
    Nx.Backend.inspect(t, to_binary(t, limit), inspect_opts)
  end

  @impl true
  def backend_copy(%T{data: %__MODULE__{ref: nil}} = t, __MODULE__, _opts), do: t
  def backend_copy(%T{} = t, __MODULE__, _opts), do: put(t, Kiln.copy(kt(t)))
  def backend_copy(%T{} = t, backend, opts), do: backend.from_binary(t, to_binary(t, Nx.size(t)), opts)

  @impl true
  def backend_transfer(%T{} = t, __MODULE__, _opts), do: t
  def backend_transfer(%T{} = t, Nx.Tensor, _opts), do: t

  def backend_transfer(%T{} = t, backend, opts) do
    moved = backend.from_binary(t, to_binary(t, Nx.size(t)), opts)
    backend_deallocate(t)
    moved
  end

  @impl true
  def backend_deallocate(%T{data: %__MODULE__{ref: nil}}), do: :ok

  def backend_deallocate(%T{data: %__MODULE__{ref: k}}) do
    if Kiln.Native.is_freed(k.ref) do
      :already_deallocated
    else
      Kiln.free(k)
    end
  end

  @impl true
  def from_pointer(_, _, _, _, _), do: raise(ArgumentError, "Kiln.Backend does not support pointers")
  @impl true
  def to_pointer(_, _), do: raise(ArgumentError, "Kiln.Backend does not support pointers")

  @impl true
  def iota(%T{shape: shape, type: type} = out, nil, _opts) do
    n = Nx.size(shape)
    put(out, Kiln.arange(0, n, type: storage_type(type)) |> Kiln.reshape(shape) |> fit(type))
  end

  def iota(%T{} = out, axis, _opts),
    do: put(out, axis_iota(out.shape, axis, storage_type(out.type)) |> fit(out.type))

  # 0..n-1 along `axis`, repeated along the others.
  defp axis_iota(shape, axis, st) do
    dims = Tuple.to_list(shape)
    n = Enum.at(dims, axis)
    ones = dims |> Enum.with_index() |> Enum.map(fn {d, i} -> if i == axis, do: d, else: 1 end)
    Kiln.arange(0, n, type: st) |> Kiln.reshape(List.to_tuple(ones)) |> expand(shape)
  end

  @impl true
  def eye(%T{shape: shape, type: type} = out, _opts) do
    r = tuple_size(shape)
    eq = Kiln.equal(axis_iota(shape, r - 2, {:s, 32}), axis_iota(shape, r - 1, {:s, 32}))
    put(out, Kiln.cast(eq, storage_type(type)))
  end

  # `k` broadcast to `shape` (numpy's rules): where(true, k, k) broadcasts all three.
  defp expand(%Kiln.Tensor{shape: shape} = k, shape), do: k
  defp expand(k, shape), do: Kiln.where(Kiln.full(shape, 1, type: {:u, 8}), k, k)

  # ---------------------------------------------------------------------------------------------
  # Elementwise

  # Nx callback => kiln-core op. Arithmetic: both sides in the output type.
  @arith [
    add: :add,
    subtract: :subtract,
    multiply: :multiply,
    pow: :pow,
    divide: :divide,
    atan2: :atan2,
    bitwise_and: :bitwise_and,
    bitwise_or: :bitwise_or,
    bitwise_xor: :bitwise_xor,
    left_shift: :left_shift,
    right_shift: :right_shift
  ]

  for {nx, kiln} <- @arith do
    @impl true
    def unquote(nx)(%T{type: type} = out, l, r) do
      gpu(unquote(nx), [out, l, r], fn ->
        put(out, Kiln.unquote(kiln)(kt(l, type), kt(r, type)) |> fit(type))
      end)
    end
  end

  # min/max: both propagate NaN, as Nx's do.
  for {nx, kiln} <- [min: :minimum, max: :maximum] do
    @impl true
    def unquote(nx)(%T{type: type} = out, l, r) do
      gpu(unquote(nx), [out, l, r], fn -> put(out, Kiln.unquote(kiln)(kt(l, type), kt(r, type))) end)
    end
  end

  # Integer quotient and remainder truncate toward zero (Elixir's div and rem, C's); kiln-core's
  # floor_divide and remainder floor (numpy's): where the floored remainder is non-zero and the
  # operands' signs differ, the quotient is one more and the remainder one divisor less. A zero
  # divisor gives 0 on the GPU (Nx.BinaryBackend raises ArithmeticError). Float remainder
  # (fmod, exact in IEEE) goes to the host: a - b * trunc(a / b) in f32 is not exact.
  for op <- [:quotient, :remainder] do
    @impl true
    def unquote(op)(%T{type: {k, _} = type} = out, l, r) when k in [:s, :u] do
      gpu(unquote(op), [out, l, r], fn ->
        {a, b} = {kt(l, type), kt(r, type)}
        rf = Kiln.mod(a, b)
        fix = Kiln.logical_and(Kiln.not_equal(rf, 0), Kiln.logical_xor(Kiln.less(a, 0), Kiln.less(b, 0)))

        res =
          if unquote(op) == :quotient,
            do: Kiln.where(fix, Kiln.add(Kiln.floor_div(a, b), 1), Kiln.floor_div(a, b)),
            else: Kiln.where(fix, Kiln.subtract(rf, b), rf)

        put(out, fit(res, type))
      end)
    end

    def unquote(op)(out, l, r), do: via_binary(unquote(op), [out, l, r])
  end

  # Comparisons and logical ops: both sides in their merged type, a bool out.
  @predicates [
    equal: :equal,
    not_equal: :not_equal,
    greater: :greater,
    less: :less,
    greater_equal: :greater_equal,
    less_equal: :less_equal,
    logical_and: :logical_and,
    logical_or: :logical_or,
    logical_xor: :logical_xor
  ]

  for {nx, kiln} <- @predicates do
    @impl true
    def unquote(nx)(out, l, r) do
      gpu(unquote(nx), [out, l, r], fn ->
        merged = Nx.Type.merge(l.type, r.type)
        put(out, Kiln.unquote(kiln)(kt(l, merged), kt(r, merged)) |> from_bool())
      end)
    end
  end

  # Unary ops: the input in the output type (Nx gives floats for the math functions).
  @unary [
    exp: :exp,
    expm1: :expm1,
    log: :log,
    log1p: :log1p,
    sigmoid: :sigmoid,
    cos: :cos,
    sin: :sin,
    tan: :tan,
    cosh: :cosh,
    sinh: :sinh,
    tanh: :tanh,
    acos: :acos,
    asin: :asin,
    atan: :atan,
    acosh: :acosh,
    asinh: :asinh,
    atanh: :atanh,
    sqrt: :sqrt,
    rsqrt: :rsqrt,
    abs: :abs,
    negate: :negate,
    ceil: :ceil,
    floor: :floor,
    bitwise_not: :bitwise_not
  ]

  for {nx, kiln} <- @unary do
    @impl true
    def unquote(nx)(%T{type: type} = out, t) do
      gpu(unquote(nx), [out, t], fn -> put(out, Kiln.unquote(kiln)(kt(t, type)) |> fit(type)) end)
    end
  end

  # erf, erfc, erf_inv and cbrt: WGSL kernels of Kiln.Backend.Kernels, in f32 (f16 converted).
  for fun <- [:erf, :erfc, :erf_inv, :cbrt] do
    @impl true
    def unquote(fun)(%T{type: type} = out, t) do
      x = kt(t, type)

      y =
        Kiln.Backend.Kernels.apply(unquote(fun), if(x.type == {:f, 32}, do: x, else: Kiln.cast(x, {:f, 32})))

      put(out, if(x.type == {:f, 32}, do: y, else: Kiln.cast(y, x.type)))
    end
  end

  # population_count / count_leading_zeros: WGSL's builtins on the 32-bit storage. A narrow
  # element is first cut to its type's width (an s8 -1 is 0xFFFFFFFF in storage, 8 ones in Nx)
  # and its leading zeros lose the extra high bits; a 64-bit one gains the high half its
  # storage leaves out (32 copies of the sign for s64, 32 zeros for u64).
  @impl true
  def population_count(%T{type: {kind, b} = type} = out, t) do
    x = cut(kt(t, type), b)
    y = Kiln.Backend.Kernels.bits(:population_count, x)
    put(out, if({kind, b} == {:s, 64}, do: Kiln.where(Kiln.less(x, 0), Kiln.add(y, 32), y), else: y))
  end

  @impl true
  def count_leading_zeros(%T{type: {kind, b} = type} = out, t) do
    x = cut(kt(t, type), b)
    y = Kiln.Backend.Kernels.bits(:count_leading_zeros, x)

    y =
      cond do
        b < 32 -> Kiln.subtract(y, 32 - b)
        {kind, b} == {:s, 64} -> Kiln.where(Kiln.less(x, 0), 0, Kiln.add(y, 32))
        b == 64 -> Kiln.add(y, 32)
        true -> y
      end

    put(out, y)
  end

  defp cut(x, b) when b < 32, do: Kiln.bitwise_and(x, Bitwise.<<<(1, b) - 1)
  defp cut(x, _), do: x

  # bitcast between the 32-bit types (Nx.Random's uniform makes floats from u32 bits this way):
  # a WGSL kernel; other widths go to the host.
  @impl true
  def bitcast(%T{type: {_, 32} = type} = out, %T{type: {_, 32} = from} = t) do
    y = if from == type, do: kt(t), else: Kiln.Backend.Kernels.bitcast(kt(t), type)
    put(out, y)
  end

  def bitcast(out, t), do: via_binary(:bitcast, [out, t])

  # Nx rounds half away from zero; kiln-core (numpy) half to even: trunc(x + copysign(0.5, x))
  # would misround 0.49999997, so floats go through floor/ceil by sign.
  @impl true
  def round(%T{type: type} = out, t) do
    if Nx.Type.float?(type) do
      x = kt(t, type)
      up = x |> Kiln.abs() |> Kiln.add(0.5) |> Kiln.floor()
      # floor(|x| + 0.5) is right except where |x| + 0.5 rounds up in float (|x| just below
      # a half): there |x| - floor(|x|) < 0.5, so take floor(|x|) instead.
      ax = Kiln.abs(x)
      fl = Kiln.floor(ax)
      r = Kiln.where(Kiln.less(Kiln.subtract(ax, fl), 0.5), fl, up)
      # x's sign, but a result of zero is +0.0 as Nx's (Nx.BinaryBackend rounds to an integer).
      put(out, Kiln.where(Kiln.equal(r, 0), r, Kiln.copysign(r, x)))
    else
      put(out, kt(t, type))
    end
  end

  # Nx (as XLA) keeps the zero's sign: sign(-0.0) is -0.0; kiln-core's sign gives 0.0.
  @impl true
  def sign(%T{type: type} = out, t) do
    x = kt(t, type)
    s = Kiln.sign(x)
    put(out, if(Nx.Type.float?(type), do: Kiln.where(Kiln.equal(x, 0), x, s), else: s))
  end

  for {nx, kiln} <- [is_nan: :is_nan, is_infinity: :is_infinity] do
    @impl true
    def unquote(nx)(%T{} = out, %T{type: type} = t) do
      if Nx.Type.float?(type),
        do: put(out, Kiln.unquote(kiln)(kt(t)) |> from_bool()),
        else: put(out, Kiln.zeros(t.shape, type: {:u, 32}))
    end
  end

  @impl true
  def logical_not(out, t), do: put(out, Kiln.logical_not(kt(t)) |> from_bool())

  @impl true
  def select(%T{type: type} = out, pred, on_true, on_false) do
    put(out, Kiln.where(kt(pred), kt(on_true, type), kt(on_false, type)) |> expand(out.shape))
  end

  @impl true
  def clip(%T{type: type} = out, t, min, max) do
    gpu(:clip, [out, t, min, max], fn -> put(out, Kiln.clip(kt(t, type), kt(min, type), kt(max, type))) end)
  end

  @impl true
  def as_type(%T{type: type} = out, %T{type: type} = t), do: put(out, kt(t))

  # To a 64-bit integer of the other signedness (s -> u64, u32/u64 -> s64) a value may leave the
  # 32 bits it is held in (-1 becomes 2^64-1): through the host, whose result store/2 places.
  def as_type(%T{type: {:u, 64}} = out, %T{type: {:s, _}} = t), do: via_binary(:as_type, [out, t])

  def as_type(%T{type: {:s, 64}} = out, %T{type: {:u, b}} = t) when b >= 32,
    do: via_binary(:as_type, [out, t])

  # Float to a 64-bit integer: the values may need the 64 bits (host). Float to a narrower one:
  # truncation, NaN gives 0 and the infinities the type's limits, as Nx's do (Kiln's cast
  # saturates at its 32-bit type's limits, which differs for the narrow types, negative values
  # to unsigned ones and NaN); finite values beyond 32 bits still saturate.
  def as_type(%T{type: {k, 64}} = out, %T{type: {f, _}} = t) when k in [:s, :u] and f in [:f, :bf],
    do: via_binary(:as_type, [out, t])

  def as_type(%T{type: {k, b} = type} = out, %T{type: {:f, _}} = t) when k in [:s, :u] do
    x = kt(t)

    {lo, hi} =
      if k == :s, do: {-Bitwise.bsl(1, b - 1), Bitwise.bsl(1, b - 1) - 1}, else: {0, Bitwise.bsl(1, b) - 1}

    st = storage_type(type)
    # To an unsigned type a negative value wraps (Nx's -2.7 as u8 is 254): its bits as s32.
    y =
      if k == :u,
        do:
          Kiln.where(
            Kiln.less(x, 0),
            Kiln.Backend.Kernels.bitcast(Kiln.cast(x, {:s, 32}), {:u, 32}),
            Kiln.cast(x, st)
          ),
        else: Kiln.cast(x, st)

    y = fit(y, type)
    inf = Kiln.is_infinity(x)
    y = Kiln.where(Kiln.logical_and(inf, Kiln.greater(x, 0)), Kiln.full({}, hi, type: st), y)
    y = Kiln.where(Kiln.logical_and(inf, Kiln.less(x, 0)), Kiln.full({}, lo, type: st), y)
    put(out, Kiln.where(Kiln.is_nan(x), Kiln.full({}, 0, type: st), y))
  end

  def as_type(%T{type: type} = out, t), do: put(out, kt(t, type) |> fit(type))

  # ---------------------------------------------------------------------------------------------
  # Reductions

  for {nx, kiln} <- [sum: :sum, product: :product, reduce_max: :max, reduce_min: :min] do
    @impl true
    def unquote(nx)(%T{type: type} = out, t, opts) do
      if Nx.size(t) == 0 do
        via_binary(unquote(nx), [out, t, opts])
      else
        gpu(unquote(nx), [out, t, opts], fn ->
          k = Kiln.unquote(kiln)(kt(t, type), axes: opts[:axes], keep_axes: opts[:keep_axes] == true)
          put(out, k |> fit(type) |> Kiln.reshape(out.shape))
        end)
      end
    end
  end

  for {nx, kiln} <- [all: :all, any: :any] do
    @impl true
    def unquote(nx)(out, t, opts) do
      k = Kiln.unquote(kiln)(kt(t), axes: opts[:axes], keep_axes: opts[:keep_axes] == true)
      put(out, k |> from_bool() |> Kiln.reshape(out.shape))
    end
  end

  for op <- [:argmax, :argmin] do
    @impl true
    def unquote(op)(out, t, opts) do
      if opts[:tie_break] == :high or Nx.size(t) == 0 do
        via_binary(unquote(op), [out, t, opts])
      else
        gpu(unquote(op), [out, t, opts], fn ->
          put(
            out,
            arg_extreme(unquote(op), kt(t), opts)
            |> Kiln.cast(storage_type(out.type))
            |> Kiln.reshape(out.shape)
          )
        end)
      end
    end
  end

  # Kiln's argmax/argmin take NaN as the extreme and, of several, the first (numpy's rule); Nx
  # takes the last NaN (its tests say so): where a float row holds a NaN, the index of its last
  # one (the first of the reversed row) replaces Kiln's.
  defp arg_extreme(op, k, opts) do
    {k, axis} = if opts[:axis] == nil, do: {Kiln.reshape(k, {Kiln.size(k)}), 0}, else: {k, opts[:axis]}
    keep = opts[:keep_axis] == true
    idx = apply(Kiln, op, [k, [axis: axis, keep_axis: keep]])

    if elem(k.type, 0) == :f do
      nan = k |> Kiln.is_nan() |> Kiln.cast({:s, 32})
      n = elem(k.shape, axis)

      last =
        Kiln.subtract(
          n - 1,
          Kiln.argmax(flip(nan, [axis]), axis: axis, keep_axis: keep) |> Kiln.cast({:s, 32})
        )

      any = Kiln.any(nan, axes: [axis], keep_axes: keep)
      Kiln.where(any, last, Kiln.cast(idx, {:s, 32}))
    else
      idx
    end
  end

  @impl true
  def cumulative_sum(out, t, opts), do: cumulative(:cumulative_sum, out, t, opts)
  @impl true
  def cumulative_product(out, t, opts), do: cumulative(:cumulative_product, out, t, opts)

  defp cumulative(op, %T{type: type} = out, t, opts) do
    axis = opts[:axis]
    rev = fn k -> if opts[:reverse], do: flip(k, [axis]), else: k end

    gpu(op, [out, t, opts], fn ->
      k = kt(t, type) |> rev.()
      k = apply(Kiln, op, [k, [axis: axis]]) |> fit(type) |> rev.()
      put(out, k)
    end)
  end

  # ---------------------------------------------------------------------------------------------
  # Linear algebra

  @impl true
  def dot(%T{type: type} = out, l, c1, b1, r, c2, b2) do
    gpu(:dot, [out, l, c1, b1, r, c2, b2], fn ->
      {a, ls} = {kt(l, type), Tuple.to_list(l.shape)}
      {b, rs} = {kt(r, type), Tuple.to_list(r.shape)}
      lf = Enum.to_list(0..(length(ls) - 1)//1) -- (c1 ++ b1)
      rf = Enum.to_list(0..(length(rs) - 1)//1) -- (c2 ++ b2)
      dims = fn shape, axes -> axes |> Enum.map(&Enum.at(shape, &1)) |> Enum.product() end
      {bn, m, k, n} = {dims.(ls, b1), dims.(ls, lf), dims.(ls, c1), dims.(rs, rf)}
      a = a |> Kiln.permute(b1 ++ lf ++ c1) |> Kiln.reshape({bn, m, k})
      b = b |> Kiln.permute(b2 ++ c2 ++ rf) |> Kiln.reshape({bn, k, n})
      put(out, Kiln.matmul(a, b) |> Kiln.reshape(out.shape))
    end)
  end

  @impl true
  def conv(%T{type: type} = out, t, k, opts) do
    spatial = tuple_size(t.shape) - 2
    ident = fn p -> p == Enum.to_list(0..(tuple_size(t.shape) - 1)) end

    mappable? =
      spatial == 2 and Enum.all?(opts[:input_dilation], &(&1 == 1)) and opts[:batch_group_size] == 1 and
        ident.(opts[:input_permutation]) and ident.(opts[:kernel_permutation]) and
        ident.(opts[:output_permutation]) and
        Enum.all?(opts[:padding], fn {lo, hi} -> lo == hi and lo >= 0 end)

    if mappable? do
      [{ph, _}, {pw, _}] = opts[:padding]
      [sh, sw] = opts[:strides]
      [dh, dw] = opts[:kernel_dilation]

      gpu(:conv, [out, t, k, opts], fn ->
        y =
          Kiln.conv2d(kt(t, type), kt(k, type),
            stride: {sh, sw},
            padding: {ph, pw},
            dilation: {dh, dw},
            groups: opts[:feature_group_size]
          )

        put(out, y)
      end)
    else
      via_binary(:conv, [out, t, k, opts])
    end
  end

  # Windows over the last two axes of a rank-4 tensor (NCHW pooling) map to Kiln's pools; any
  # other window goes to the host. Nx pads window_max with -inf (the type's minimum) and
  # window_sum with 0, as max_pool2d and avg_pool2d do; the sum is the average times the window.
  @impl true
  def window_max(out, t, window, opts), do: window(:window_max, out, t, window, opts)
  @impl true
  def window_min(out, t, window, opts), do: window(:window_min, out, t, window, opts)
  @impl true
  def window_sum(out, t, window, opts), do: window(:window_sum, out, t, window, opts)

  defp window(op, %T{type: type} = out, t, window, opts) do
    case pool_args(t, window, opts) do
      {k, stride, pad} when op == :window_max ->
        gpu(op, [out, t, window, opts], fn ->
          put(out, Kiln.max_pool2d(kt(t, type), k, stride: stride, padding: pad))
        end)

      {k, stride, pad} when op == :window_min and elem(type, 0) == :f ->
        gpu(op, [out, t, window, opts], fn ->
          m = kt(t, type) |> Kiln.negate() |> Kiln.max_pool2d(k, stride: stride, padding: pad)
          put(out, Kiln.negate(m))
        end)

      {{kh, kw} = k, stride, pad} when op == :window_sum and elem(type, 0) == :f ->
        gpu(op, [out, t, window, opts], fn ->
          avg = Kiln.avg_pool2d(kt(t, type), k, stride: stride, padding: pad)
          put(out, Kiln.multiply(avg, kh * kw))
        end)

      _ ->
        via_binary(op, [out, t, window, opts])
    end
  end

  defp pool_args(%T{shape: shape}, window, opts) do
    with 4 <- tuple_size(shape),
         {1, 1, kh, kw} <- window,
         [1, 1, sh, sw] <- opts[:strides],
         true <- Enum.all?(opts[:window_dilations], &(&1 == 1)),
         [{0, 0}, {0, 0}, {ph, ph}, {pw, pw}] <- opts[:padding],
         true <- ph <= div(kh, 2) and pw <= div(kw, 2) do
      {{kh, kw}, {sh, sw}, {ph, pw}}
    else
      _ -> nil
    end
  end

  # ---------------------------------------------------------------------------------------------
  # Shape and movement

  @impl true
  def reshape(out, t), do: put(out, Kiln.reshape(kt(t), out.shape))
  @impl true
  def squeeze(out, t, _axes), do: put(out, Kiln.reshape(kt(t), out.shape))
  @impl true
  def transpose(out, t, axes), do: put(out, Kiln.permute(kt(t), axes))

  @impl true
  def broadcast(out, t, shape, axes) do
    # t's axis i becomes out axis axes[i] (Nx keeps them in order): the others get size 1, then
    # the tensor is expanded.
    placed = Map.new(Enum.zip(axes, Tuple.to_list(t.shape)))
    dims = for i <- 0..(tuple_size(shape) - 1)//1, do: Map.get(placed, i, 1)
    put(out, kt(t) |> Kiln.reshape(List.to_tuple(dims)) |> expand(shape))
  end

  @impl true
  def slice(out, t, starts, lengths, strides) do
    shape = Tuple.to_list(t.shape)

    k =
      [shape, starts, lengths, strides]
      |> Enum.zip()
      |> Enum.with_index()
      |> Enum.reduce(kt(t), fn {{dim, start, len, stride}, axis}, k ->
        # Nx clamps the start so that the slice fits.
        start = start |> to_int() |> max(0) |> min(max(dim - len, 0))

        if start == 0 and len == dim and stride == 1,
          do: k,
          else: Kiln.slice(k, axis, start, start + len, stride)
      end)

    put(out, Kiln.reshape(k, out.shape))
  end

  defp to_int(i) when is_integer(i), do: i
  defp to_int(%T{} = t), do: Nx.to_number(t)

  @impl true
  def put_slice(%T{type: type} = out, t, starts, slice) do
    shape = Tuple.to_list(t.shape)
    sl = Tuple.to_list(slice.shape)

    starts =
      Enum.zip_with([shape, starts, sl], fn [d, s, l] -> s |> to_int() |> max(0) |> min(max(d - l, 0)) end)

    config = Enum.zip_with([shape, starts, sl], fn [d, s, l] -> {s, d - s - l} end)
    padded = pad_with(kt(slice, type), config, 0)
    mask = pad_with(Kiln.full(slice.shape, 1, type: {:u, 8}), config, 0)
    put(out, Kiln.where(mask, padded, kt(t, type)))
  end

  @impl true
  def pad(%T{type: type} = out, t, pad_value, config) do
    if Enum.any?(config, fn {_, _, interior} -> interior != 0 end) do
      via_binary(:pad, [out, t, pad_value, config])
    else
      value = Nx.to_number(pad_value)
      put(out, pad_with(kt(t, type), Enum.map(config, fn {lo, hi, _} -> {lo, hi} end), value))
    end
  end

  # `k` padded with `value` by {lo, hi} per axis (negative: cut).
  defp pad_with(k, config, value) do
    config
    |> Enum.with_index()
    |> Enum.reduce(k, fn {{lo, hi}, axis}, k ->
      k = if lo < 0, do: Kiln.slice(k, axis, -lo, elem(k.shape, axis)), else: k
      k = if hi < 0, do: Kiln.slice(k, axis, 0, elem(k.shape, axis) + hi), else: k
      block = fn n -> Kiln.full(put_elem(k.shape, axis, n), value, type: k.type) end
      parts = if(lo > 0, do: [block.(lo)], else: []) ++ [k] ++ if(hi > 0, do: [block.(hi)], else: [])
      if length(parts) == 1, do: k, else: Kiln.concat(parts, axis: axis)
    end)
  end

  @impl true
  def reverse(out, t, axes), do: put(out, flip(kt(t), axes))

  defp flip(k, axes) do
    Enum.reduce(axes, k, fn axis, k ->
      n = elem(k.shape, axis)
      if n <= 1, do: k, else: Kiln.index_select(k, axis, Kiln.arange(n - 1, -1, step: -1))
    end)
  end

  @impl true
  def concatenate(%T{type: type} = out, tensors, axis),
    do: put(out, Kiln.concat(Enum.map(tensors, &kt(&1, type)), axis: axis))

  @impl true
  def stack(%T{type: type} = out, tensors, axis) do
    parts =
      Enum.map(tensors, fn t ->
        kt(t, type) |> Kiln.reshape(t.shape |> Tuple.insert_at(axis, 1))
      end)

    put(out, Kiln.concat(parts, axis: axis))
  end

  @impl true
  def sort(out, t, opts) do
    gpu(:sort, [out, t, opts], fn ->
      put(out, Kiln.sort(kt(t), axis: opts[:axis], direction: opts[:direction] || :asc))
    end)
  end

  @impl true
  def argsort(out, t, opts) do
    gpu(:argsort, [out, t, opts], fn ->
      k = Kiln.argsort(kt(t), axis: opts[:axis], direction: opts[:direction] || :asc)
      put(out, Kiln.cast(k, storage_type(out.type)))
    end)
  end

  @impl true
  def take(out, t, indices, opts) do
    idx = kt(indices, {:s, 32}) |> Kiln.reshape({Nx.size(indices)})
    put(out, Kiln.index_select(kt(t), opts[:axis], idx) |> Kiln.reshape(out.shape))
  end

  @impl true
  def take_along_axis(out, t, indices, opts) do
    put(out, Kiln.gather(kt(t), opts[:axis], kt(indices, {:s, 32})))
  end

  # Nx's gather: each row of `indices`' last axis is a position along `axes`; the tensor is
  # permuted to put those axes first and flattened over them, the positions become flat indices
  # (a multiply by the strides and a sum), and index_select picks the rows.
  @impl true
  def gather(out, t, indices, opts) do
    axes = opts[:axes]
    rest = Enum.to_list(0..(tuple_size(t.shape) - 1)) -- axes
    dims = Enum.map(axes, &elem(t.shape, &1))
    rest_dims = Enum.map(rest, &elem(t.shape, &1))
    strides = dims |> Enum.reverse() |> Enum.scan(1, &(&1 * &2)) |> Enum.reverse() |> tl() |> Kernel.++([1])

    k =
      t |> kt() |> Kiln.permute(axes ++ rest) |> Kiln.reshape(List.to_tuple([Enum.product(dims) | rest_dims]))

    flat = Kiln.tensor(strides, type: {:s, 32})
    lin = kt(indices, {:s, 32}) |> Kiln.multiply(flat) |> Kiln.sum(axes: [-1])
    lin = Kiln.reshape(lin, {Nx.size(lin.shape)})
    put(out, Kiln.index_select(k, 0, lin) |> Kiln.reshape(out.shape))
  end

  # indexed_add / indexed_put: the target permuted to put the indexed axes first and flattened
  # to [rows, rest], the indices made flat row numbers (as in gather), then Kiln.Backend.Kernels'
  # scatter kernel in place on a copy, and the layout undone. f16 goes through f32.
  @impl true
  def indexed_add(out, t, indices, updates, opts), do: indexed(:add, out, t, indices, updates, opts)
  @impl true
  def indexed_put(out, t, indices, updates, opts), do: indexed(:put, out, t, indices, updates, opts)

  defp indexed(op, %T{type: type} = out, t, indices, updates, opts) do
    axes = opts[:axes] || Enum.to_list(0..(elem(indices.shape, tuple_size(indices.shape) - 1) - 1))
    rank = tuple_size(t.shape)
    rest = Enum.to_list(0..(rank - 1)) -- axes
    perm = axes ++ rest
    dims = Enum.map(axes, &elem(t.shape, &1))
    rows = Enum.product(dims)
    r = rest |> Enum.map(&elem(t.shape, &1)) |> Enum.product()
    st = storage_type(type)
    work = if st == {:f, 16}, do: {:f, 32}, else: st
    to_work = fn k -> if k.type == work, do: k, else: Kiln.cast(k, work) end

    target = kt(t, type) |> to_work.() |> Kiln.permute(perm) |> Kiln.reshape({rows, r}) |> Kiln.copy()
    strides = dims |> Enum.reverse() |> Enum.scan(1, &(&1 * &2)) |> Enum.reverse() |> tl() |> Kernel.++([1])
    lin = kt(indices, {:s, 32}) |> Kiln.multiply(Kiln.tensor(strides, type: {:s, 32})) |> Kiln.sum(axes: [-1])
    lin = Kiln.reshape(lin, {Kiln.size(lin)})
    upd = kt(updates, type) |> to_work.() |> Kiln.reshape({Kiln.size(lin), r})

    y = Kiln.Backend.Kernels.scatter(op, target, lin, upd)
    permuted = Enum.map(perm, &elem(t.shape, &1)) |> List.to_tuple()
    inverse = perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
    y = y |> Kiln.reshape(permuted) |> Kiln.permute(inverse)
    y = if y.type == st, do: y, else: Kiln.cast(y, st)
    put(out, fit(y, type))
  end

  # Batches along axis 0, sliced on the GPU as the stream is read; with `leftover: :repeat` the
  # last batch is completed from the start of the tensor, as Nx.BinaryBackend does.
  @impl true
  def to_batched(out, t, opts) do
    n = elem(out.shape, 0)
    total = elem(t.shape, 0)
    full = div(total, n)
    last = if rem(total, n) != 0 and opts[:leftover] == :repeat, do: full, else: full - 1
    k = kt(t)

    Stream.map(0..last//1, fn
      ^full ->
        tail = Kiln.slice(k, 0, full * n, total)
        head = Kiln.slice(k, 0, 0, n - (total - full * n))
        put(out, Kiln.concat([tail, head], axis: 0))

      i ->
        put(out, Kiln.slice(k, 0, i * n, i * n + n))
    end)
  end

  # ---------------------------------------------------------------------------------------------
  # Everything else: on the host.

  # Nx.LinAlg's decompositions and solvers: Nx's own implementations (loops of small ops, which
  # on the GPU cost one dispatch and often a read back each: Nx.LinAlg.qr of a 4x4 matrix took
  # seconds on lavapipe) run on the host tensors, as Nx.BinaryBackend runs them.
  @linalg [lu: 3, qr: 3, eigh: 3, svd: 3, cholesky: 2, solve: 3, determinant: 2]

  for {name, arity} <- @linalg do
    args = Macro.generate_arguments(arity, __MODULE__)
    @impl true
    def unquote(name)(unquote_splicing(args)), do: via_binary(unquote(name), unquote(args))
  end

  @optional Nx.Backend.behaviour_info(:optional_callbacks)

  @fallbacks for(
               {name, arity} <- Nx.Backend.behaviour_info(:callbacks),
               {name, arity} not in @optional,
               not Module.defines?(__MODULE__, {name, arity}),
               do: {name, arity}
             )
             |> Enum.sort()

  for {name, arity} <- @fallbacks do
    args = Macro.generate_arguments(arity, __MODULE__)
    @impl true
    def unquote(name)(unquote_splicing(args)), do: via_binary(unquote(name), unquote(args))
  end

  @doc "The required callbacks that always run on the host (`Nx.BinaryBackend`), as `{name, arity}`."
  def fallbacks, do: @fallbacks

  # Types the GPU cannot hold (and host-held s64/u64): every callback that computes (all but creation from bytes,
  # readback and transfer, which handle host-held data themselves) sends a call with such a
  # tensor, as output or input, to the host, whatever its own implementation would do.
  @not_computing [
    init: 1,
    from_binary: 3,
    to_binary: 2,
    inspect: 2,
    backend_copy: 3,
    backend_transfer: 3,
    backend_deallocate: 1,
    from_pointer: 5,
    to_pointer: 2
  ]

  @computing for {name, arity} <- Nx.Backend.behaviour_info(:callbacks),
                 Module.defines?(__MODULE__, {name, arity}, :def),
                 {name, arity} not in @not_computing,
                 do: {name, arity}

  defoverridable @computing

  for {name, arity} <- @computing do
    args = Macro.generate_arguments(arity, __MODULE__)
    @impl true
    def unquote(name)(unquote_splicing(args)) do
      if host_only?(unquote(name), unquote(args)),
        do: via_binary(unquote(name), unquote(args)),
        else: super(unquote_splicing(args))
    end
  end

  # Whether any tensor among the arguments (lists of tensors included) has a type the GPU cannot
  # hold.
  # Ops whose s64/u64 result may leave the 32 bits it would be computed in on the GPU (which
  # would wrap it silently): on the host, exact, whatever their inputs' values. Movement,
  # comparisons, min/max, bitwise and/or/xor, right shifts, division and remainder stay within
  # their inputs' range and run on the GPU.
  @wide_overflow [:add, :subtract, :multiply, :pow, :left_shift, :negate, :abs, :bitwise_not, :sum] ++
                   [:product, :cumulative_sum, :cumulative_product, :dot, :conv, :window_sum] ++
                   [:window_product, :indexed_add]

  defp host_only?(name, [%T{type: {k, 64}} | _]) when k in [:s, :u] and name in @wide_overflow, do: true
  defp host_only?(_name, args), do: host_only?(args)

  defp host_only?(args) do
    Enum.any?(args, fn
      %T{data: %__MODULE__{ref: nil}} -> true
      # A host tensor of another backend with 64-bit values beyond 32 bits (it would not upload).
      %T{type: {k, 64}, data: %Nx.BinaryBackend{state: bin}} when k in [:s, :u] -> not fits32?(bin, k)
      %T{type: type} -> not supported?(type)
      list when is_list(list) -> Enum.any?(list, &match?(%T{}, &1)) and host_only?(list)
      _ -> false
    end)
  end
end
