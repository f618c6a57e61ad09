defmodule Kiln.Backend.Kernels do
  @moduledoc false
  # What Nx has and kiln-core's op table does not, as WGSL kernels of Kiln.Kernel: elementwise
  # f32 functions (erf, erfc, erf_inv, cbrt), bit counts, bitcast between the 32-bit types and
  # a scatter (indexed_add / indexed_put). The functions take one dispatch each, so that code
  # such as Axon's GELU (x * (1 + erf(x / sqrt(2))) / 2) and Nx.Random (bitcast, erf_inv) stay
  # on the GPU. Compiled on first use and kept in :persistent_term; a dispatch that fails (a
  # reset device) recompiles once and retries.

  # Each body maps `v` (f32) to the result.
  @bodies %{
    # erfc: Numerical Recipes' Chebyshev fit (erfcc, fractional error < 1.2e-7 everywhere), so
    # that erfc keeps its relative precision far into the tail where 1 - erf would give 0.
    erfc: """
    if (is_nan(v)) { return v; }
    let z = abs(v);
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
      + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let r = t * exp(-z * z + p);
    return select(2.0 - r, r, v >= 0.0);
    """,
    # erf: its Maclaurin series to x^13 below 0.5 (keeps the relative precision near 0), else
    # 1 - erfc with erfc as above.
    erf: """
    if (is_nan(v)) { return v; }
    let z = abs(v);
    if (z < 0.5) {
      let s = v * v;
      return 1.1283791670955126 * v * (1.0 + s * (-1.0 / 3.0 + s * (1.0 / 10.0 + s * (-1.0 / 42.0
        + s * (1.0 / 216.0 + s * (-1.0 / 1320.0 + s * (1.0 / 9360.0)))))));
    }
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
      + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let r = 1.0 - t * exp(-z * z + p);
    return select(-r, r, v >= 0.0);
    """,
    # erf_inv: Giles' single-precision approximation ("Approximating the erfinv function", GPU
    # Computing Gems), the one Nx.BinaryBackend (Complex.erf_inv) evaluates in double: ±1 give
    # ±inf, NaN and |v| > 1 NaN.
    erf_inv: """
    if (is_nan(v) || abs(v) > 1.0) { return bitcast<f32>(0x7fc00000u); }
    if (abs(v) == 1.0) { return v * bitcast<f32>(0x7f800000u); }
    var w = -log((1.0 - v) * (1.0 + v));
    var p: f32;
    if (w < 5.0) {
      w = w - 2.5;
      p = 2.81022636e-08;
      p = 3.43273939e-07 + p * w;
      p = -3.5233877e-06 + p * w;
      p = -4.39150654e-06 + p * w;
      p = 0.00021858087 + p * w;
      p = -0.00125372503 + p * w;
      p = -0.00417768164 + p * w;
      p = 0.246640727 + p * w;
      p = 1.50140941 + p * w;
    } else {
      w = sqrt(w) - 3.0;
      p = -0.000200214257;
      p = 0.000100950558 + p * w;
      p = 0.00134934322 + p * w;
      p = -0.00367342844 + p * w;
      p = 0.00573950773 + p * w;
      p = -0.0076224613 + p * w;
      p = 0.00943887047 + p * w;
      p = 1.00167406 + p * w;
      p = 2.83297682 + p * w;
    }
    return p * v;
    """,
    # cbrt: pow(|v|, 1/3) refined by one Newton step, with v's sign (-0.0 kept); 0, infinities
    # and NaN pass through.
    cbrt: """
    let z = abs(v);
    if (z == 0.0 || z > 3.4e38 || is_nan(v)) { return v; }
    var y = pow(z, 1.0 / 3.0);
    y = y - (y * y * y - z) / (3.0 * y * y);
    return select(-y, y, v >= 0.0);
    """
  }

  @doc false
  def names, do: Map.keys(@bodies)

  @doc false
  # `fun` applied to every element of the f32 Kiln tensor `x`.
  def apply(fun, %Kiln.Tensor{type: {:f, 32}} = x) when is_map_key(@bodies, fun),
    do: map(fun, x, {:f, 32})

  @doc false
  # The bits of each element of `x` (f32, s32 or u32) read as `type` (another of the three).
  def bitcast(%Kiln.Tensor{} = x, type), do: map({:bitcast, x.type, type}, x, type)

  @doc false
  # countOneBits / countLeadingZeros of each element of the s32 or u32 tensor `x`.
  def bits(fun, %Kiln.Tensor{type: type} = x) when fun in [:population_count, :count_leading_zeros],
    do: map({:bits, fun, type}, x, type)

  defp map(key, x, out_type) do
    y = Kiln.empty(x.shape, type: out_type)
    n = Kiln.size(x)

    if n > 0 do
      groups = div(n + 255, 256)
      # Past 65535 workgroups in x, rows of them in y (the shader folds id.y back in).
      wg = if groups <= 65_535, do: {groups, 1, 1}, else: {65_535, div(groups + 65_534, 65_535), 1}
      run(key, [x, y], wg, <<>>)
    end

    y
  end

  # A dispatch; one that fails (a reset device) recompiles the kernel once and retries.
  defp run(key, tensors, wg, uniforms) do
    Kiln.Kernel.dispatch(kernel(key), tensors, wg, uniforms)
  rescue
    Kiln.Error ->
      :persistent_term.erase({__MODULE__, key})
      Kiln.Kernel.dispatch(kernel(key), tensors, wg, uniforms)
  end

  @doc false
  # In place on `target` ([P, R], f32, s32 or u32): for each i of `lin` (s32 [n], flat row
  # indices into target), row lin[i] of target gets row i of `updates` ([n, R]) added (:add) or
  # written (:put). One invocation per column walks the n updates in order, so no two
  # invocations touch one element: repeated indices add up (or the last one wins, as Nx's
  # indexed_put), with no atomics. Rows outside [0, P) are skipped.
  #
  # The updates go in chunks of @chunk per dispatch (dispatches run in order): lavapipe
  # (llvmpipe) stops any kernel loop after 65535 iterations without a word, and a long serial
  # loop on a real GPU risks its watchdog.
  @chunk 16_384
  def scatter(op, %Kiln.Tensor{shape: {p, r}, type: type} = target, lin, updates) when op in [:add, :put] do
    n = Kiln.size(lin)

    if n > 0 and r > 0 do
      groups = div(r + 63, 64)
      wg = if groups <= 65_535, do: {groups, 1, 1}, else: {65_535, div(groups + 65_534, 65_535), 1}
      key = {:scatter, op, type}

      for start <- 0..(n - 1)//@chunk do
        uniforms = <<min(n, start + @chunk)::32-little, r::32-little, p::32-little, start::32-little>>
        run(key, [lin, updates, target], wg, uniforms)
      end
    end

    target
  end

  defp kernel(fun) do
    case :persistent_term.get({__MODULE__, fun}, nil) do
      nil ->
        k = Kiln.Kernel.compile!(source(fun), "main")
        :persistent_term.put({__MODULE__, fun}, k)
        k

      k ->
        k
    end
  end

  @wgsl %{{:f, 32} => "f32", {:s, 32} => "i32", {:u, 32} => "u32"}

  defp source({:bits, fun, type}) do
    t = Map.fetch!(@wgsl, type)
    f = if fun == :population_count, do: "countOneBits", else: "countLeadingZeros"

    """
    @group(0) @binding(0) var<storage, read> x: array<#{t}>;
    @group(0) @binding(1) var<storage, read_write> y: array<#{t}>;

    @compute @workgroup_size(256)
    fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
      let i = id.x + id.y * nw.x * 256u;
      if (i < arrayLength(&x)) { y[i] = #{f}(x[i]); }
    }
    """
  end

  defp source({:bitcast, from, to}) do
    """
    @group(0) @binding(0) var<storage, read> x: array<#{@wgsl[from]}>;
    @group(0) @binding(1) var<storage, read_write> y: array<#{@wgsl[to]}>;

    @compute @workgroup_size(256)
    fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
      let i = id.x + id.y * nw.x * 256u;
      if (i < arrayLength(&x)) { y[i] = bitcast<#{@wgsl[to]}>(x[i]); }
    }
    """
  end

  defp source({:scatter, op, type}) do
    t = Map.fetch!(@wgsl, type)
    write = if op == :add, do: "y[at] = y[at] + u[i * c.r + j];", else: "y[at] = u[i * c.r + j];"

    """
    struct Counts { end: u32, r: u32, p: u32, start: u32 }
    @group(0) @binding(0) var<storage, read> lin: array<i32>;
    @group(0) @binding(1) var<storage, read> u: array<#{t}>;
    @group(0) @binding(2) var<storage, read_write> y: array<#{t}>;
    @group(0) @binding(3) var<uniform> c: Counts;

    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
      let j = id.x + id.y * nw.x * 64u;
      if (j >= c.r) { return; }
      for (var i = c.start; i < c.end; i = i + 1u) {
        let row = lin[i];
        if (row >= 0 && u32(row) < c.p) {
          let at = u32(row) * c.r + j;
          #{write}
        }
      }
    }
    """
  end

  defp source(fun) do
    """
    @group(0) @binding(0) var<storage, read> x: array<f32>;
    @group(0) @binding(1) var<storage, read_write> y: array<f32>;

    // By the bits: a compiler may assume v == v.
    fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

    fn f(v: f32) -> f32 {
    #{Map.fetch!(@bodies, fun)}
    }

    @compute @workgroup_size(256)
    fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
      let i = id.x + id.y * nw.x * 256u;
      if (i < arrayLength(&x)) { y[i] = f(x[i]); }
    }
    """
  end
end
