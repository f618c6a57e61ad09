defmodule Kiln.Session do
  @moduledoc """
  Sessions: the unit of ownership and limits when several tenants share one device
  (docs/DESIGN.md, "Sessions and untrusted kernels").

  A session is current for a **BEAM process** inside `with/2`: every tensor (op results
  included) and every kernel the process creates there belongs to the session and counts
  against its limits, whichever scheduler thread runs each call. Other processes are not
  affected; each may have its own session current at the same time.

      iex> {:ok, s} = Kiln.Session.open(max_bytes: 4096)
      iex> Kiln.Session.with(s, fn -> Kiln.tensor([1.0, 2.0]) |> Kiln.add(1.0) |> Kiln.to_list() end)
      [2.0, 3.0]
      iex> try do
      ...>   Kiln.Session.with(s, fn -> Kiln.zeros({100_000}, type: {:f, 32}) end)
      ...> rescue
      ...>   e in Kiln.Error -> e.code
      ...> end
      :quota_exceeded
      iex> Kiln.Session.close(s)
      :ok

  Limits (every one optional; 0 or `nil` means none):

  * `:max_bytes` - bytes the session's live tensors may hold at once (size classes). Over it an
    allocation raises `Kiln.Error` with code `:quota_exceeded` and nothing else changes.
  * `:max_ops_per_dispatch`, `:max_ops_total` - operations (workgroups × invocations per
    workgroup) per dispatch and in all; over them `:compute_limit`.
  * `:max_loop_iterations` - loop iterations one invocation of a kernel compiled in the session
    may run; a kernel that runs out stops, and reading its output raises `:compute_limit`.
  * `:max_gpu_time_ms` - GPU time the session's passes may take in all (timestamp queries where
    the adapter has them, else the wall clock of its waits); once spent, `:compute_limit`.
  * `:max_kernels` - kernels the session may hold at once; over it compiling one raises
    `:quota_exceeded`. Each live kernel also counts a fixed charge (Kiln core's
    `KERNEL_CHARGE_BYTES`) against `:max_bytes`.
  * Shader policy: `:max_source_bytes`, `:max_workgroup_invocations`, `:max_bindings`,
    `:allow_f16`, `:allow_atomics`, `:allow_workgroup_memory`, `:allow_subgroups` (booleans,
    `true` by default). A kernel against the policy fails to compile with code `:shader`.

  **Closing.** `close/1` frees everything the session owns at once, also tensors still held:
  using one afterwards raises `:invalid_argument` naming the closed session. A session nobody
  closes is closed by its resource's destructor when the last reference to it goes (garbage
  collection). A process that exits (or is killed) inside `with/2` leaves it: a monitor on the
  process drops its hold, so the session closes then unless another process still holds it.
  """

  @enforce_keys [:ref, :id]
  defstruct [:ref, :id]

  @type t :: %__MODULE__{}

  alias Kiln.SafeNative, as: Native

  # {option, default, kind}, in the NIF's argument order (both from kiln-core's
  # SessionLimits::fields(): an integer's default is 0, no limit; an allow_*'s true).
  @limits [
    # BEGIN GENERATED (kiln gen): kiln-core's session limits (core/src/session/limits.rs)
    max_bytes: {0, :u64},
    max_ops_per_dispatch: {0, :u64},
    max_ops_total: {0, :u64},
    max_gpu_time_ms: {0, :u64},
    max_loop_iterations: {0, :u32},
    max_kernels: {0, :u32},
    max_source_bytes: {0, :u64},
    max_workgroup_invocations: {0, :u32},
    max_bindings: {0, :u32},
    allow_f16: {true, :bool},
    allow_atomics: {true, :bool},
    allow_workgroup_memory: {true, :bool},
    allow_subgroups: {true, :bool}
    # END GENERATED (kiln gen)
  ]

  @doc """
  Opens a session with the limits in `opts` (see the module doc):
  `{:ok, session} | {:error, %Kiln.Error{}}`.
  """
  @spec open(keyword) :: {:ok, t} | {:error, Kiln.Error.t()}
  def open(opts \\ []) do
    with {:ok, args} <- limit_args(opts) do
      ref = apply(Native, :session_open, args)
      {:ok, %__MODULE__{ref: ref, id: Native.session_stats(ref).id}}
    end
  end

  @doc "Like `open/1`, raising `Kiln.Error`."
  @spec open!(keyword) :: t
  def open!(opts \\ []) do
    case open(opts) do
      {:ok, s} -> s
      {:error, e} -> raise e
    end
  end

  defp limit_args(opts) do
    known = Keyword.keys(@limits)

    cond do
      not Keyword.keyword?(opts) ->
        {:error, Kiln.Error.new(:invalid_argument, "session limits are a keyword list, got #{inspect(opts)}")}

      (unknown = Keyword.keys(opts) -- known) != [] ->
        {:error,
         Kiln.Error.new(
           :invalid_argument,
           "unknown session limit(s) #{inspect(unknown)} (known: #{Enum.map_join(known, ", ", &inspect/1)})"
         )}

      true ->
        Enum.reduce_while(@limits, {:ok, []}, fn {key, {default, kind}}, {:ok, acc} ->
          case check(key, Keyword.get(opts, key, default) || default, kind) do
            {:ok, v} -> {:cont, {:ok, [v | acc]}}
            error -> {:halt, error}
          end
        end)
        |> case do
          {:ok, rev} -> {:ok, Enum.reverse(rev)}
          error -> error
        end
    end
  end

  @max %{u64: 0xFFFFFFFFFFFFFFFF, u32: 0xFFFFFFFF}

  defp check(_key, v, :bool) when is_boolean(v), do: {:ok, v}

  defp check(key, v, :bool),
    do: {:error, Kiln.Error.new(:invalid_argument, "#{key} must be true or false, got #{inspect(v)}")}

  defp check(key, v, kind) do
    max = Map.fetch!(@max, kind)

    if is_integer(v) and v >= 0 and v <= max,
      do: {:ok, v},
      else:
        {:error,
         Kiln.Error.new(:invalid_argument, "#{key} must be an integer from 0 to #{max}, got #{inspect(v)}")}
  end

  @doc """
  Runs `fun` with `session` current for the calling process and returns its result. Sessions
  nest (the one current before comes back when `fun` returns or raises). Only the calling
  process is affected: a process `fun` spawns starts with no session (give it the session and
  let it call `with/2` itself).
  """
  @spec with(t, (-> result)) :: result when result: term
  def with(%__MODULE__{ref: ref}, fun) when is_function(fun, 0) do
    Native.session_enter(ref)

    try do
      fun.()
    after
      Native.session_exit()
    end
  end

  @doc "The calling process's current session (innermost `with/2`), or nil."
  @spec current() :: t | nil
  def current do
    case Native.session_current() do
      nil -> nil
      ref -> %__MODULE__{ref: ref, id: Native.session_stats(ref).id}
    end
  end

  @doc """
  Closes the session: frees every tensor and kernel it owns now (later use raises
  `:invalid_argument`), and refuses any further work in it. Closing twice is fine. Returns `:ok`.
  """
  @spec close(t) :: :ok
  def close(%__MODULE__{ref: ref}) do
    Kiln.unwrap!(Native.session_close(ref))
    :ok
  end

  @doc """
  The session's counters, a map: `:id`, `:bytes_in_use`, `:peak_bytes`, `:live_buffers`,
  `:ops_total`, `:dispatches`, `:kernels_compiled`, `:quota_exceeded`, `:compute_limit_hits`,
  `:policy_rejections`, `:closed`.
  """
  @spec stats(t) :: map
  def stats(%__MODULE__{ref: ref}), do: Native.session_stats(ref)

  defimpl Inspect do
    def inspect(%Kiln.Session{ref: ref, id: id}, _opts) do
      if Kiln.SafeNative.session_stats(ref).closed,
        do: "#Kiln.Session<#{id} closed>",
        else: "#Kiln.Session<#{id}>"
    end
  end
end
