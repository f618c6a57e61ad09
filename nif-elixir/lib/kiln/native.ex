defmodule Kiln.Native do
  @moduledoc false
  # Written by hand but for its marked region (the generated NIFs' names and arities): the
  # loading and the NIFs of native/src's hand-written files. The NIF boundary. Every function here is replaced by the Rust one from priv/kiln_nif.so
  # (nif-elixir/native). Before loading, the library is checked for the hash of the sources this
  # module was compiled against, so a stale build is refused with a clear message instead of
  # being called with the wrong conventions.

  @on_load :__load__

  # The NIF's own sources and kiln-core's (native/build.rs hashes the same files): a change to
  # core makes a library built before it stale, so it is rebuilt rather than loaded.
  @root Path.expand("../../..", __DIR__)
  @sources ["nif-elixir/native/src/*.rs", "core/src/**/*.rs", "shaders/*.wgsl"]
           |> Enum.flat_map(&Path.wildcard(Path.join(@root, &1)))
           |> Enum.map(&Path.relative_to(&1, @root))
           |> Enum.sort()
  for f <- @sources, do: @external_resource(Path.join(@root, f))

  fnv = fn bytes, h ->
    for <<b <- bytes>>, reduce: h do
      h -> Bitwise.band(Bitwise.bxor(h, b) * 0x100000001B3, 0xFFFFFFFFFFFFFFFF)
    end
  end

  @source_hash (for f <- @sources, reduce: 0xCBF29CE484222325 do
                  h ->
                    h = fnv.(f, h)
                    h = fnv.(<<0>>, h)
                    h = fnv.(File.read!(Path.join(@root, f)), h)
                    fnv.(<<0>>, h)
                end)
               |> Integer.to_string(16)
               |> String.downcase()
               |> String.pad_leading(16, "0")

  @marker "kiln-nif-source-hash:" <> @source_hash
  @src_priv Path.expand("../../priv", __DIR__)
  @build_cmd "make elixir-nif (from the repository root) or `mix compile` in nif-elixir/"

  @doc false
  def source_hash_expected, do: @source_hash

  @doc false
  def library_path do
    dir =
      case :code.priv_dir(:kiln) do
        {:error, _} -> @src_priv
        d -> List.to_string(d)
      end

    Path.join(dir, "kiln_nif.so")
  end

  @doc false
  def __load__ do
    path = library_path()

    status =
      case File.read(path) do
        {:error, :enoent} ->
          {:error, "the Kiln NIF is missing: #{path} does not exist. Build it with #{@build_cmd}"}

        {:error, reason} ->
          {:error, "cannot read the Kiln NIF #{path}: #{:file.format_error(reason)}"}

        {:ok, bytes} ->
          if :binary.match(bytes, @marker) == :nomatch do
            {:error,
             "the Kiln NIF at #{path} is stale (built from other sources than lib/kiln/native.ex " <>
               "was compiled against). Rebuild it with #{@build_cmd}"}
          else
            case :erlang.load_nif(String.to_charlist(Path.rootname(path)), 0) do
              :ok ->
                :ok

              {:error, {reason, text}} ->
                {:error,
                 "cannot load the Kiln NIF #{path}: #{reason}: #{text}. Rebuild it with #{@build_cmd}"}
            end
          end
      end

    :persistent_term.put({__MODULE__, :status}, status)
    # Always :ok: a missing NIF must give a clear Kiln.Error at the first call, not an
    # UndefinedFunctionError from a module that failed to load.
    :ok
  end

  @doc false
  def status, do: :persistent_term.get({__MODULE__, :status}, {:error, "the Kiln NIF was never loaded"})

  @doc false
  def not_loaded(name) do
    message =
      case status() do
        :ok -> "#{name} is not implemented by this build of the Kiln NIF. Rebuild it with #{@build_cmd}"
        {:error, msg} -> msg
      end

    {code, status} = if status() == :ok, do: {:unsupported, 11}, else: {:nif_not_loaded, 13}
    raise Kiln.Error, code: code, status: status, message: message
  end

  @nifs [
    source_hash: 0,
    error_codes: 0,
    from_binary: 3,
    to_binary: 1,
    free: 1,
    is_freed: 1,
    # hand-written (native/src): creation beside the table's, elementwise by name, clip's
    # two bounds, the bytes and tensordot's axes
    empty: 2,
    fill: 2,
    copy: 1,
    unary: 2,
    binary: 3,
    binary_scalar: 4,
    clip: 3,
    quant_from_bytes: 4,
    tensordot: 5,
    # BEGIN GENERATED (kiln gen): the plain ops of kiln-core's op table (native/src/ops_gen.rs)
    zeros: 2,
    ones: 2,
    full: 3,
    arange: 4,
    random_uniform: 5,
    random_normal: 5,
    where_: 3,
    cast: 2,
    matmul: 2,
    sum: 3,
    mean: 3,
    max: 3,
    min: 3,
    all: 3,
    any: 3,
    var: 4,
    argmax: 3,
    argmin: 3,
    softmax: 2,
    log_softmax: 2,
    layer_norm: 4,
    rms_norm: 3,
    batch_norm: 6,
    conv2d: 7,
    max_pool2d: 4,
    avg_pool2d: 4,
    reshape: 2,
    permute: 2,
    transpose: 3,
    concat: 2,
    slice: 5,
    index_select: 3,
    gather: 3,
    embedding: 2,
    rope: 3,
    attention: 5,
    quantize: 2,
    dequantize: 4,
    quant_matmul: 4,
    quant_embedding: 4,
    sort: 3,
    argsort: 3,
    topk: 4,
    searchsorted: 3,
    count_nonzero: 3,
    nonzero: 1,
    unique_all: 1,
    unique_counts: 1,
    unique_inverse: 1,
    unique_values: 1,
    isin: 3,
    cumulative_sum: 4,
    cumulative_prod: 4,
    prod: 4,
    std: 4,
    diff: 5,
    vecdot: 3,
    # END GENERATED (kiln gen)
    # kernels and runtime
    kernel_compile: 2,
    kernel_dispatch: 4,
    devices: 0,
    synchronize: 0,
    reset_devices: 0,
    memory_stats: 0,
    empty_cache: 0,
    has_f16: 0,
    # sessions (native/src/session.rs) and metrics
    session_open: 13,
    session_enter: 1,
    session_exit: 0,
    session_current: 0,
    session_close: 1,
    session_stats: 1,
    metrics_text: 0,
    profile_start: 0,
    profile_stop: 0,
    profile_running: 0
  ]

  @doc false
  def nifs, do: @nifs

  for {name, arity} <- @nifs do
    args = Macro.generate_arguments(arity, __MODULE__)
    # The arguments are unused until the NIF replaces this body.
    def unquote(name)(unquote_splicing(args)) do
      _ = {unquote_splicing(args)}
      # Through apply/3: the stub's result type stays dynamic (a direct call raises, which
      # Elixir 1.18's type checker would take as the NIF's type and warn about every caller).
      apply(__MODULE__, :not_loaded, [unquote(name)])
    end
  end
end

defmodule Kiln.SafeNative do
  @moduledoc false
  # The NIF functions as `Kiln` and `Kiln.Kernel` call them (`alias Kiln.SafeNative, as: Native`).
  #
  # The NIF decodes every argument with its own types and answers
  # `{:error, {:invalid_argument, 1, message}}` for a bad one, so `Kiln.unwrap!/1` raises
  # `Kiln.Error`. This layer is the safety net for whatever still reaches rustler as a `badarg`
  # (an `ArgumentError` raised by the NIF call itself, not by code it called): it becomes the
  # same `{:error, _}` reply, or a raised `Kiln.Error` for the NIFs that do not reply with a
  # tuple. A panic that escaped the NIF's own guard (rustler raises `:nif_panicked`) becomes a
  # `:panic` `Kiln.Error`. Nothing raises a bare `ArgumentError` to the user.

  @plain [
    source_hash: 0,
    error_codes: 0,
    is_freed: 1,
    session_open: 13,
    session_enter: 1,
    session_current: 0,
    session_stats: 1,
    profile_running: 0
  ]

  for {name, arity} <- Kiln.Native.nifs() do
    args = Macro.generate_arguments(arity, __MODULE__)
    plain? = {name, arity} in @plain

    def unquote(name)(unquote_splicing(args)) do
      Kiln.Native.unquote(name)(unquote_splicing(args))
    rescue
      e in [ArgumentError, ErlangError] ->
        Kiln.SafeNative.__failed__(unquote(name), unquote(args), unquote(plain?), e, __STACKTRACE__)
    end
  end

  @doc false
  def __failed__(name, args, plain?, e, stacktrace) do
    from_nif? = match?([{Kiln.Native, ^name, _, _} | _], stacktrace)

    error =
      cond do
        from_nif? and is_struct(e, ArgumentError) ->
          Kiln.Error.new(
            :invalid_argument,
            "#{name}: an argument has the wrong type or is out of range: #{inspect(args, limit: 8, printable_limit: 80)}"
          )

        is_struct(e, ErlangError) and e.original == :nif_panicked ->
          Kiln.Error.new(:panic, "#{name}: the native code panicked")

        true ->
          reraise e, stacktrace
      end

    if plain?, do: raise(error), else: {:error, {error.code, error.status, error.message}}
  end
end
