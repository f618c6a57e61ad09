defmodule KilnNxBackendTest do
  # Kiln.Backend against Nx.BinaryBackend (Nx's own reference implementation): the same Nx call
  # on the same inputs, once on each backend, on awkward shapes (scalars, size-1 axes,
  # broadcasting, negative axes; Nx has no empty tensors) and values (NaN, ±inf, ±0, ties).
  use ExUnit.Case, async: true

  @specials [:nan, :infinity, :neg_infinity, 0.0, -0.0, 1.5, -2.5, 0.49999997, -3.0e38, 7.0]

  defp host(data, opts \\ []), do: Nx.tensor(data, Keyword.put(opts, :backend, Nx.BinaryBackend))
  defp gpu(%Nx.Tensor{} = t), do: Nx.backend_copy(t, Kiln.Backend)

  # Runs `fun` on the host tensors and on their Kiln copies; the results must agree in shape,
  # type and values: bit for bit (`exact: true`, so -0.0 != 0.0), else within `tol` (relative,
  # with an absolute floor) and NaN where the reference has NaN.
  defp check(fun, inputs, opts \\ []) do
    want = apply(fun, inputs)
    got = apply(fun, Enum.map(inputs, &gpu/1))
    compare(got, want, opts)
    got
  end

  defp compare(got, want, opts) when is_tuple(want) do
    Enum.zip_with(Tuple.to_list(got), Tuple.to_list(want), &compare(&1, &2, opts))
  end

  defp compare(%Nx.Tensor{} = got, %Nx.Tensor{} = want, opts) do
    assert got.shape == want.shape
    assert got.type == want.type
    assert %Kiln.Backend{} = got.data
    shown = "got #{inspect(Nx.to_flat_list(got))}, want #{inspect(Nx.to_flat_list(want))}"

    cond do
      not Nx.Type.float?(want.type) ->
        assert Nx.to_binary(got) == Nx.to_binary(want), shown

      opts[:exact] ->
        # Bit for bit but for NaN's payload and sign, which no Nx function promises.
        bits = fn t -> Enum.map(Nx.to_flat_list(t), &if(is_float(&1), do: <<&1::float-64>>, else: &1)) end
        assert bits.(got) == bits.(want), shown

      true ->
        tol = Keyword.get(opts, :tol, 1.0e-5)

        Enum.zip_with(Nx.to_flat_list(got), Nx.to_flat_list(want), fn g, w ->
          ok = if is_atom(w) or is_atom(g), do: g == w, else: abs(g - w) <= tol * max(1.0, abs(w))
          assert ok, shown
        end)
    end
  end

  describe "elementwise" do
    test "unary ops on ±0, ±inf, NaN and ties, bit for bit where exact" do
      x = host(@specials)

      # abs: Nx.BinaryBackend keeps -0.0's sign (Elixir's abs/1), IEEE and Kiln do not.
      check(&Nx.abs/1, [x])

      for f <- [&Nx.negate/1, &Nx.is_nan/1, &Nx.is_infinity/1, &Nx.logical_not/1] do
        check(f, [x], exact: true)
      end

      # Nx.BinaryBackend cannot round NaN or infinities (it raises): finite values there, ties
      # and the largest float below 0.5 included, and the specials checked on their own.
      r = host([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, -0.49999997, 3.0e38, -7.25, 8.5e6])

      for f <- [&Nx.ceil/1, &Nx.floor/1, &Nx.sign/1] do
        check(f, [r], exact: true)
      end

      # round: half away from zero as Nx, and a result of zero is +0.0 as Nx.BinaryBackend's
      # (-0.3 and -0.0 give 0.0), bit for bit.
      check(&Nx.round/1, [r], exact: true)
      check(&Nx.round/1, [host([-0.3, -0.0, -1.0e-7, 0.2])], exact: true)

      sp = gpu(host([:nan, :infinity, :neg_infinity]))
      assert Nx.to_flat_list(Nx.round(sp)) == [:nan, :infinity, :neg_infinity]
      assert Nx.to_flat_list(Nx.floor(sp)) == [:nan, :infinity, :neg_infinity]

      y = host([0.0, -0.0, 0.5, -0.75, 1.0, 3.5, :nan, 1.0e-3])

      for f <-
            [&Nx.exp/1, &Nx.expm1/1, &Nx.sigmoid/1, &Nx.sin/1, &Nx.cos/1, &Nx.tanh/1, &Nx.atan/1] ++
              [&Nx.sinh/1, &Nx.asinh/1] do
        check(f, [y], tol: 2.0e-5)
      end

      # (Nx.BinaryBackend raises outside these functions' domains.)
      pos = host([0.5, 1.0, 3.5, 1.0e-3, 250.0, :nan])

      for f <- [&Nx.log/1, &Nx.log1p/1, &Nx.sqrt/1, &Nx.rsqrt/1, &Nx.acosh/1] do
        check(f, [Nx.add(pos, 1.0)], tol: 2.0e-5)
      end

      # erf, erfc, cbrt (WGSL kernels of Kiln.Backend's own) against the host's double-precision
      # :math.erf / :math.erfc / cbrt, across the series/fit switch at 0.5 and into erfc's tail
      # (relative precision kept there: erfc(9) is 4.1e-37).
      e = host([0.0, -0.0, 1.0e-6, -3.0e-3, 0.1, 0.4999, 0.5, -0.75, 1.0, 2.0, -2.5, 3.7, 9.0, -9.0])
      erf = check(&Nx.erf/1, [e], tol: 5.0e-7)

      Enum.zip_with(Nx.to_flat_list(erf), Nx.to_flat_list(Nx.erf(e)), fn g, w ->
        assert abs(g - w) <= 1.0e-6 * abs(w), "erf #{g} vs #{w}: relative error"
      end)

      erfc = Nx.erfc(gpu(e))
      want = Nx.erfc(e)
      compare(erfc, want, tol: 1.0e-5)

      Enum.zip_with(Nx.to_flat_list(erfc), Nx.to_flat_list(want), fn g, w ->
        assert abs(g - w) <= 2.0e-5 * abs(w), "erfc #{g} vs #{w}: relative error"
      end)

      check(&Nx.cbrt/1, [host([27.0, -8.0, 2.0, 1.0e-30, -0.0, 0.0, 3.0e38, 0.001])], tol: 2.0e-7)
      # erf_inv: the same approximation as the host's, there in double; both branches (w < 5
      # and the tail), and ±1.
      check(&Nx.erf_inv/1, [host([0.0, -0.0, 1.0e-5, 0.3, -0.7, 0.99, -0.9999, 0.999999, 1.0, -1.0])],
        tol: 2.0e-6
      )

      check(&Nx.erf/1, [host([0.5, -1.5], type: :f16)])
      sp = gpu(host([:nan, :infinity, :neg_infinity]))
      assert Nx.to_flat_list(Nx.erf(sp)) == [:nan, 1.0, -1.0]
      assert Nx.to_flat_list(Nx.erfc(sp)) == [:nan, 0.0, 2.0]
      assert Nx.to_flat_list(Nx.cbrt(sp)) == [:nan, :infinity, :neg_infinity]
      assert Nx.to_flat_list(Nx.erf_inv(gpu(host([:nan, 1.5, -2.0])))) == [:nan, :nan, :nan]

      # Infinities: Nx.BinaryBackend's answers there are not IEEE's (tanh(inf) is NaN), so
      # these are checked against the IEEE values.
      inf = gpu(host([:infinity, :neg_infinity]))
      assert Nx.to_flat_list(Nx.exp(inf)) == [:infinity, 0.0]
      assert Nx.to_flat_list(Nx.tanh(inf)) == [1.0, -1.0]
      assert Nx.to_flat_list(Nx.sigmoid(inf)) == [1.0, 0.0]
      assert Nx.to_flat_list(Nx.log(gpu(host([0.0, -1.0])))) == [:neg_infinity, :nan]

      # Integer inputs: Nx gives floats for the math functions, integers for the rest.
      i = host([-3, 0, 7, -2_147_483_647], type: :s32)
      check(&Nx.abs/1, [i])
      check(&Nx.sign/1, [i])
      check(&Nx.exp/1, [host([0, 1, 2], type: :s32)])
    end

    test "binary ops broadcast, promote types and handle NaN" do
      a = host([[[1.5, -2.0, :nan]], [[0.0, -0.0, :infinity]]])
      b = host([[2.0], [-0.5], [0.0], [:neg_infinity]])

      for f <- [&Nx.add/2, &Nx.subtract/2, &Nx.multiply/2] do
        check(f, [a, b], exact: true)
      end

      # (Nx.BinaryBackend's divide cannot take infinities.)
      fa = host([[[1.5, -2.0, 3.0]], [[0.0, -0.0, 1.0e-3]]])
      fb = host([[2.0], [-0.5], [4.0], [-3.0]])
      check(&Nx.divide/2, [fa, fb], tol: 1.0e-6)
      check(&Nx.atan2/2, [fa, fb], tol: 1.0e-6)
      assert Nx.to_flat_list(Nx.divide(gpu(host([1.0, -1.0, 0.0])), 0.0)) == [:infinity, :neg_infinity, :nan]

      for f <- [&Nx.equal/2, &Nx.not_equal/2, &Nx.less/2, &Nx.greater_equal/2, &Nx.logical_and/2] do
        check(f, [a, b])
      end

      # NaN in min/max: both propagate it. (The sign of min(-0.0, 0.0) is not compared:
      # Nx.BinaryBackend gives its first argument, WGSL's min leaves it open.)
      check(&Nx.min/2, [a, b], tol: 0.0)
      check(&Nx.max/2, [b, a], tol: 0.0)
      check(&Nx.max/2, [host([1.0, 5.0, -1.0]), host([2.0, 3.0, -0.0])], exact: true)

      # s64 (held as s32) with f32: f32; s32 with u8: s32.
      check(&Nx.add/2, [host([1, -2, 3]), host([0.5, 0.25, 2.0])])
      check(&Nx.multiply/2, [host([1, -2, 3], type: :s32), host([200, 7, 0], type: :u8)])
      check(&Nx.pow/2, [host([1.5, 2.0, 0.0]), host([2.0, -1.0, 3.0])], tol: 1.0e-6)

      ints = [host([12, -7, 5, 0], type: :s32), host([5, 3, -2, 9], type: :s32)]

      for f <- [&Nx.bitwise_and/2, &Nx.bitwise_or/2, &Nx.bitwise_xor/2, &Nx.remainder/2, &Nx.quotient/2] do
        check(f, ints)
      end

      # quotient and remainder truncate (Elixir's div/rem): every sign combination, exact
      # multiples, unsigned and narrow types.
      n = host(for(a <- [-7, -6, -1, 0, 1, 6, 7], _ <- 1..4, do: a), type: :s32)
      d = host(List.flatten(List.duplicate([3, -3, 2, -7], 7)), type: :s32)
      check(&Nx.quotient/2, [n, d])
      check(&Nx.remainder/2, [n, d])
      check(&Nx.quotient/2, [host([7, 200, 9], type: :u8), host([2, 7, 10], type: :u8)])
      check(&Nx.remainder/2, [host([-128, 100], type: :s8), host([-1, -7], type: :s8)])
      check(&Nx.remainder/2, [host([5.5, -5.5, 1.0e6]), host([2.0, 2.0, 0.3])])

      check(&Nx.left_shift/2, [host([1, -3, 5], type: :s32), host([0, 2, 31], type: :s32)])
      check(&Nx.right_shift/2, [host([-16, 16, 7], type: :s32), host([2, 2, 1], type: :s32)])
    end

    test "population_count and count_leading_zeros on every integer width" do
      for type <- [:s8, :u8, :s16, :u16, :s32, :u32, :s64, :u64] do
        {kind, _} = Nx.Type.normalize!(type)
        vals = if kind == :s, do: [0, 1, -1, 7, -128, 100], else: [0, 1, 255, 7, 128, 100]
        t = host(vals, type: type)
        check(&Nx.population_count/1, [t])
        check(&Nx.count_leading_zeros/1, [t])
      end
    end

    test "narrow integers wrap as Nx's do" do
      check(&Nx.add/2, [host([200, 255, 3], type: :u8), host([100, 1, 4], type: :u8)])
      check(&Nx.negate/1, [host([-128, 5, 127], type: :s8)])
      check(&Nx.multiply/2, [host([300, -2], type: :s16), host([300, 20000], type: :s16)])
      check(&Nx.subtract/2, [host([0, 7], type: :u16), host([1, 9], type: :u16)])
      check(&Nx.as_type(&1, :u8), [host([300, -1, 255], type: :s32)])
    end

    test "select, clip and as_type" do
      pred = host([[1, 0, 7], [0, 0, 1]], type: :u8)
      check(&Nx.select/3, [pred, host([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), host(-1.0)], exact: true)
      check(&Nx.clip(&1, -1.0, 2.0), [host([-3.0, -0.0, 0.5, 9.0, :infinity])], exact: true)
      check(&Nx.clip(&1, 0, 5), [host([-3, 4, 9], type: :s32)])
      check(&Nx.as_type(&1, :s32), [host([1.7, -2.7, 0.0, 1.0e6])])
      check(&Nx.as_type(&1, :f16), [host([1.0, 65504.0, 1.0e-3, :nan])], exact: true)
      check(&Nx.as_type(&1, :f32), [host([3, -4])])
    end
  end

  describe "reductions" do
    # Nx has no empty tensors (every dimension is positive), so none are tried here.
    test "axes, keep_axes, negative axes, scalars" do
      t = host(Enum.map(0..23, &(&1 * 0.5 - 4.0))) |> Nx.reshape({2, 3, 4})

      for f <- [&Nx.sum/2, &Nx.reduce_max/2, &Nx.reduce_min/2, &Nx.product/2] do
        check(&f.(&1, axes: [-1]), [t], tol: 1.0e-5)
        check(&f.(&1, axes: [0, 2], keep_axes: true), [t], tol: 1.0e-5)
        check(&f.(&1, []), [t], tol: 1.0e-5)
      end

      check(&Nx.mean(&1, axes: [1]), [t])
      check(&Nx.all(&1, axes: [1]), [host([[1, 0], [1, 1]])])
      check(&Nx.any(&1, axes: [0]), [host([[0, 0], [1, 0]])])
      check(&Nx.sum(&1, axes: [-2]), [host([[1, 2, 3], [4, 5, 6]], type: :u8)])

      check(&Nx.sum/1, [host(2.5)])
      check(&Nx.reduce_max(&1, axes: []), [host(-0.0)], exact: true)
      check(&Nx.sum/1, [host([:nan, 1.0])])
    end

    test "argmax and argmin: ties, NaN, axes" do
      t = host([[3.0, 7.0, 7.0, -1.0], [0.0, -0.0, -5.0, -5.0]])
      check(&Nx.argmax(&1, axis: 1), [t])
      check(&Nx.argmin(&1, axis: -1, keep_axis: true), [t])
      check(&Nx.argmax/1, [t])
      check(&Nx.argmax(&1, axis: 1, tie_break: :high), [t])
      check(&Nx.argmin(&1, axis: 0), [host([[1, 5], [1, -2]], type: :s32)])
      # NaN is the extreme of both; of several NaNs, the last one's index (Nx's rule, which its
      # own tests state; Kiln's argmax gives the first's, numpy's).
      n = host([[1.0, :nan, 3.0, 2.0], [:neg_infinity, 2.0, :infinity, 0.0]])

      for f <- [&Nx.argmax(&1, axis: 1), &Nx.argmin(&1, axis: 1), &Nx.argmax/1, &Nx.argmin(&1, axis: 0)] do
        check(f, [n])
      end

      several = host([[:nan, :nan, 1.0], [2.0, :nan, :nan], [:nan, 0.0, :nan], [1.0, 1.0, 0.0]])

      for f <-
            [&Nx.argmax(&1, axis: 1), &Nx.argmin(&1, axis: 1, keep_axis: true), &Nx.argmax/1] ++
              [&Nx.argmin/1, &Nx.argmax(&1, axis: 0), &Nx.argmin(Nx.as_type(&1, :f16), axis: 1)] do
        check(f, [several])
      end

      for f <- [&Nx.reduce_max(&1, axes: [1]), &Nx.reduce_min(&1, axes: [0]), &Nx.sort(&1, axis: 1)] do
        check(f, [n], exact: true)
      end
    end
  end

  describe "linear algebra" do
    test "dot: matrices, vectors, contraction and batch axes, integers" do
      a = host(Enum.map(1..6, &(&1 * 0.5))) |> Nx.reshape({2, 3})
      b = host(Enum.map(1..12, &(&1 - 6.0))) |> Nx.reshape({3, 4})
      check(&Nx.dot/2, [a, b])
      check(&Nx.dot/2, [a, host([1.0, -1.0, 2.0])])
      check(&Nx.dot/2, [host([1.0, 2.0]), host([3.0, -4.0])])
      check(&Nx.dot(&1, [0], &2, [1]), [a, host(Enum.map(1..8, &(&1 * 1.0))) |> Nx.reshape({4, 2})])

      x = host(Enum.map(1..24, &(&1 / 7))) |> Nx.reshape({2, 3, 4})
      y = host(Enum.map(1..40, &(&1 / 11))) |> Nx.reshape({2, 4, 5})
      check(&Nx.dot(&1, [2], [0], &2, [1], [0]), [x, y])
      check(&Nx.dot/2, [host([[1, 2], [3, 4]], type: :s32), host([[5], [-6]], type: :s32)])
      check(&Nx.dot/2, [host(3.0), host([[1.0], [2.0]])])
    end

    test "conv (2-D, NCHW) against the host" do
      x = host(Enum.map(1..50, &(:math.sin(&1) * 1.0))) |> Nx.reshape({1, 2, 5, 5})
      k = host(Enum.map(1..36, &(:math.cos(&1) * 1.0))) |> Nx.reshape({2, 2, 3, 3})
      check(&Nx.conv/2, [x, k], tol: 1.0e-5)
      check(&Nx.conv(&1, &2, strides: [2, 1], padding: [{1, 1}, {2, 2}], kernel_dilation: [1, 2]), [x, k])
      # Not mapped to Kiln.conv2d (asymmetric padding): the host computes it.
      check(&Nx.conv(&1, &2, padding: [{0, 1}, {1, 0}]), [x, k])
    end

    test "pooling windows (rank 4, last two axes) against the host" do
      x = host(Enum.map(1..50, &(:math.sin(&1 * 1.3) * 4.0))) |> Nx.reshape({1, 2, 5, 5})
      x = Nx.put_slice(x, [0, 0, 0, 0], host([[[[:nan, :infinity]]]]))

      for f <- [&Nx.window_max/3, &Nx.window_min/3] do
        check(&f.(&1, {1, 1, 2, 2}, strides: [1, 1, 2, 2]), [x], exact: true)
        check(&f.(&1, {1, 1, 3, 3}, padding: [{0, 0}, {0, 0}, {1, 1}, {1, 1}]), [x], exact: true)
      end

      check(&Nx.window_sum(&1, {1, 1, 2, 3}, strides: [1, 1, 1, 2]), [Nx.slice(x, [0, 0, 1, 1], [1, 2, 4, 4])])

      check(&Nx.window_max(&1, {1, 1, 2, 2}), [host([[[[1, -5, 3], [7, 2, -8]]]], type: :s32)])
      # Windows Kiln's pools do not take: the host.
      check(&Nx.window_max(&1, {1, 2, 2, 2}), [x], exact: true)
      check(&Nx.window_sum(&1, {1, 1, 2, 2}, window_dilations: [1, 1, 2, 1]), [x])
    end
  end

  describe "shape and movement" do
    test "reshape, transpose, squeeze, broadcast with axes, reverse" do
      t = host(Enum.map(0..11, &(&1 * 1.0))) |> Nx.reshape({3, 1, 4})
      check(&Nx.transpose(&1, axes: [2, 0, 1]), [t], exact: true)
      check(&Nx.squeeze/1, [t], exact: true)
      check(&Nx.reshape(&1, {4, 3}), [t], exact: true)
      check(&Nx.broadcast(&1, {2, 3, 5, 4}), [t], exact: true)
      check(&Nx.broadcast(&1, {3, 2}, axes: [0]), [host([1, 2, 3], type: :s32)])
      check(&Nx.broadcast(&1, {3, 2, 4}, axes: [0, 2]), [host([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])])
      check(&Nx.broadcast(&1, {2, 3}), [host([-0.0, 1.0, :nan])], exact: true)
      check(&Nx.broadcast(&1, {2, 2}), [host(:neg_infinity)], exact: true)
      check(&Nx.reverse(&1, axes: [0, 2]), [t], exact: true)
      check(&Nx.new_axis(&1, -1), [t], exact: true)
    end

    test "slice, put_slice, concatenate, stack, pad" do
      t = host(Enum.map(0..29, &(&1 * 1.0))) |> Nx.reshape({5, 6})
      check(&Nx.slice(&1, [1, 2], [3, 2]), [t], exact: true)
      check(&Nx.slice(&1, [0, 1], [3, 2], strides: [2, 3]), [t], exact: true)
      # Nx clamps a start that would overrun, also a start given as a tensor.
      check(&Nx.slice(&1, [4, 5], [2, 3]), [t], exact: true)
      check(&Nx.slice(&1, [Nx.tensor(3), 0], [2, 6]), [t], exact: true)
      check(&Nx.slice_along_axis(&1, 1, 2, axis: -1), [t], exact: true)
      check(&Nx.put_slice(&1, [1, 4], &2), [t, host([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]])], exact: true)
      check(&Nx.concatenate([&1, &2], axis: -1), [t, Nx.negate(t)], exact: true)
      check(&Nx.concatenate([&1, &2]), [host([1, 2], type: :s32), host([0.5])])
      check(&Nx.stack([&1, &2], axis: 1), [host([1.0, 2.0]), host([3.0, 4.0])], exact: true)
      check(&Nx.pad(&1, -0.0, [{1, 2, 0}, {-2, 1, 0}]), [t], exact: true)
      check(&Nx.pad(&1, 9, [{0, 0, 1}, {1, 0, 0}]), [host([[1, 2], [3, 4]], type: :s32)])
    end

    test "iota, eye, constants, sort, argsort, cumulative sums, take" do
      kiln = [backend: Kiln.Backend]
      bin = [backend: Nx.BinaryBackend]
      compare(Nx.iota({2, 3}, kiln), Nx.iota({2, 3}, bin), [])

      compare(
        Nx.iota({2, 3, 2}, [axis: 1, type: :f32] ++ kiln),
        Nx.iota({2, 3, 2}, [axis: 1, type: :f32] ++ bin),
        []
      )

      compare(Nx.eye({3, 4}, kiln), Nx.eye({3, 4}, bin), [])
      # u8 and s8 iotas past their range wrap, as Nx's do.
      compare(Nx.iota({300}, [type: :u8] ++ kiln), Nx.iota({300}, [type: :u8] ++ bin), [])

      compare(
        Nx.iota({2, 150}, [axis: 1, type: :s8] ++ kiln),
        Nx.iota({2, 150}, [axis: 1, type: :s8] ++ bin),
        []
      )

      compare(Nx.eye({2, 2, 2}, [type: :f16] ++ kiln), Nx.eye({2, 2, 2}, [type: :f16] ++ bin), exact: true)

      compare(Nx.broadcast(Nx.tensor(:nan, kiln), {2}), Nx.broadcast(Nx.tensor(:nan, bin), {2}), exact: true)

      s = host([3.0, -0.0, :nan, -1.0, 3.0, :neg_infinity, 0.0])
      check(&Nx.sort/1, [s], exact: true)
      check(&Nx.sort(&1, direction: :desc), [s], exact: true)
      check(&Nx.argsort(&1, stable: true), [s])

      check(&Nx.argsort(&1, axis: 1, direction: :desc, stable: true), [
        host([[3, 1, 3], [2, 2, 0]], type: :s32)
      ])

      c = host([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
      check(&Nx.cumulative_sum(&1, axis: 1), [c])
      check(&Nx.cumulative_sum(&1, axis: 0, reverse: true), [c])
      check(&Nx.cumulative_product(&1, axis: 1), [c])

      check(&Nx.take(&1, &2, axis: 1), [c, host([[2, 0], [1, 1]])], exact: true)
      check(&Nx.take_along_axis(&1, &2, axis: 1), [c, host([[2, 0, 0], [1, 1, 2]])], exact: true)

      g = host(Enum.map(0..23, &(&1 * 1.0))) |> Nx.reshape({2, 3, 4})
      check(&Nx.gather(&1, &2), [g, host([[1, 2], [0, 0], [1, 0]])], exact: true)
      check(&Nx.gather(&1, &2, axes: [0, 2]), [g, host([[[1, 3]], [[0, 0]]])], exact: true)
      check(&Nx.gather(&1, &2, axes: [1]), [g, host([[2], [0]], type: :s64)], exact: true)

      # Scatter: repeated indices add up (indexed_add) or the last one wins (indexed_put).
      idx = host([[1, 2], [0, 0], [1, 2], [1, 0]])
      upd = host(Enum.map(1..16, &(&1 * 0.25))) |> Nx.reshape({4, 4})
      check(&Nx.indexed_add(&1, &2, &3), [g, idx, upd], exact: true)
      check(&Nx.indexed_put(&1, &2, &3), [g, idx, upd], exact: true)

      check(&Nx.indexed_add(&1, &2, &3, axes: [0, 2]), [
        g,
        host([[1, 3], [1, 3]]),
        host([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
      ])

      check(&Nx.indexed_put(&1, &2, &3), [
        host([1, 2, 3], type: :s32),
        host([[2], [0], [2]]),
        host([7, 8, 9], type: :s32)
      ])

      check(&Nx.indexed_add(&1, &2, &3), [
        host([250, 2], type: :u8),
        host([[0], [0]]),
        host([3, 4], type: :u8)
      ])

      check(&Nx.indexed_add(&1, &2, &3), [
        host([1.0, 2.0], type: :f16),
        host([[1], [1]]),
        host([0.5, 0.25], type: :f16)
      ])
    end

    test "to_batched slices on the GPU, leftovers repeated or discarded" do
      t = host(Enum.map(0..9, &(&1 * 1.5))) |> Nx.reshape({5, 2})

      for leftover <- [:repeat, :discard], size <- [2, 5, 3] do
        want = Nx.to_batched(t, size, leftover: leftover) |> Enum.to_list()
        got = Nx.to_batched(gpu(t), size, leftover: leftover) |> Enum.to_list()
        assert length(got) == length(want)
        Enum.zip_with(got, want, &compare(&1, &2, exact: true))
      end
    end
  end

  describe "types" do
    test "every integer type goes up and comes back unchanged (random bytes, odd sizes)" do
      :rand.seed(:exsss, {7, 8, 9})

      for {type, n} <- [u8: 1001, s8: 1003, u16: 501, s16: 3, s32: 7, u32: 5] do
        {_, bits} = Nx.Type.normalize!(type)
        bin = :crypto.strong_rand_bytes(n * div(bits, 8))
        h = Nx.from_binary(bin, type, backend: Nx.BinaryBackend)
        k = gpu(h)
        assert Nx.to_binary(k) == bin
        # and compute with them: the GPU's values are the host's
        check(&Nx.add(&1, 1), [h])
      end

      # 64-bit values inside the 32-bit range, negative ones included.
      vals = for _ <- 1..333, do: :rand.uniform(0xFFFFFFFF) - 0x80000000
      s64 = host(vals, type: :s64)
      assert Nx.to_list(gpu(s64)) == vals
      u64 = host(Enum.map(vals, &(&1 + 0x80000000)), type: :u64)
      assert Nx.to_list(gpu(u64)) == Nx.to_list(u64)
    end

    test "s64 and u64 are held in 32 bits when their values fit" do
      t = Nx.tensor([1, -2, 2_147_483_647], type: :s64, backend: Kiln.Backend)
      assert t.type == {:s, 64}
      assert Nx.to_list(t) == [1, -2, 2_147_483_647]
      assert Nx.to_list(Nx.tensor([4_294_967_295], type: :u64, backend: Kiln.Backend)) == [4_294_967_295]

      assert %Kiln.Backend{ref: %Kiln.Tensor{type: {:s, 32}}} = t.data
      assert %Kiln.Backend{ref: nil} = Nx.tensor([2_147_483_648], type: :s64, backend: Kiln.Backend).data
    end

    # Values beyond 32 bits keep the tensor on the host, with Nx.BinaryBackend's 64-bit results;
    # a result that fits goes back to the GPU.
    # Float to integer: NaN gives 0, the infinities the type's limits (Nx's rule); to s64/u64
    # the values may need all 64 bits (the host).
    test "as_type from float to integers: NaN and infinities as Nx" do
      x = host([:nan, :infinity, :neg_infinity, 1.9, -2.7, 0.0, 100.0])

      for type <- [:u8, :s8, :u16, :s16, :s32, :u32, :s64, :u64] do
        check(&Nx.as_type(&1, type), [x])
      end

      check(&Nx.as_type(&1, :s64), [host([1.0e12, -3.5e15])])
    end

    # Ops whose 64-bit results may leave 32 bits run on the host: exact wherever the result lands.
    test "s64/u64 arithmetic is exact past 32 bits" do
      a = host([2_147_483_647, -2_147_483_648, 65_536, 3], type: :s64)
      assert %Kiln.Backend{ref: %Kiln.Tensor{}} = gpu(a).data

      for f <-
            [&Nx.add(&1, &1), &Nx.multiply(&1, &1), &Nx.subtract(&1, 2_147_483_647), &Nx.negate/1] ++
              [&Nx.abs/1, &Nx.left_shift(&1, 20), &Nx.sum/1, &Nx.product/1, &Nx.cumulative_sum/1] do
        check(f, [a])
      end

      u = host([4_294_967_295, 1, 0], type: :u64)
      for f <- [&Nx.add(&1, 1), &Nx.bitwise_not/1, &Nx.pow(&1, 2), &Nx.dot(&1, &1)], do: check(f, [u])
      # Ops that stay within their inputs' range stay on the GPU.
      assert %Kiln.Backend{ref: %Kiln.Tensor{}} = check(&Nx.right_shift(&1, 1), [a]).data
      check(&Nx.max(&1, 0), [a])
    end

    test "s64 and u64 values beyond 32 bits stay on the host, exact" do
      big = host([0, -2_147_483_649, 5, Bitwise.<<<(1, 40)], type: :s64)
      assert %Kiln.Backend{ref: nil} = gpu(big).data
      check(&Nx.add(&1, 1), [big])
      check(&Nx.multiply(&1, &1), [big])
      assert %Kiln.Backend{ref: %Kiln.Tensor{}} = check(&Nx.right_shift(&1, 40), [big]).data
      check(&Nx.as_type(&1, :u64), [host([-1], type: :s64)])
      check(&Nx.subtract(&1, 1), [host([4_294_967_296], type: :u64)])
      # A constant: Nx.Random.key splits a 64-bit seed with shifts.
      check(&Nx.add(&1, Nx.u64(999_999_999_999)), [host([1], type: :u64)])
      assert Nx.to_list(Nx.Random.key(999_999_999_999)) == [232, 3_567_587_327]
      # Integer constants wrap to their type's width, as Nx's do.
      assert Nx.to_list(Nx.tensor([-1, 300], type: :u8, backend: Kiln.Backend)) == [255, 44]

      assert Nx.to_list(Nx.add(gpu(host([0], type: :u32)), Nx.tensor(-1, type: :u32, backend: Kiln.Backend))) ==
               [4_294_967_295]
    end

    test "f64 is held as f32 on the GPU when the user opts in, with a range check" do
      try do
        Application.put_env(:kiln, :f64, :f32)
        t = Nx.tensor([0.1, :nan, :neg_infinity, -0.0], type: :f64, backend: Kiln.Backend)
        assert t.type == {:f, 64}
        assert %Kiln.Backend{ref: %Kiln.Tensor{type: {:f, 32}}} = t.data
        [a, :nan, :neg_infinity, z] = Nx.to_flat_list(t)
        assert a == Float.round(0.1, 7) or abs(a - 0.1) < 1.0e-8
        assert <<1::1, _::63>> = <<z::float-64>>

        assert_raise ArgumentError, ~r/beyond f32/, fn ->
          Nx.tensor([1.0e300], type: :f64, backend: Kiln.Backend)
        end
      after
        Application.delete_env(:kiln, :f64)
      end
    end
  end

  describe "types the GPU cannot hold" do
    setup :watch_host_calls

    # f64 (without the opt-in), complex, bf16, f8 and sub-byte integers stay on the host as
    # Kiln.Backend tensors (ref: nil); every op that touches one runs on Nx.BinaryBackend, so the
    # results are that backend's bit for bit, and a result of a GPU type goes back to the GPU.
    test "f64 stays on the host with its full precision and range" do
      t = Nx.tensor([0.1, 1.0e300, -0.0, 2.5], type: :f64, backend: Kiln.Backend)
      assert %Kiln.Backend{ref: nil} = t.data
      h = host([0.1, 1.0e300, -0.0, 2.5], type: :f64)
      assert Nx.to_binary(t) == Nx.to_binary(h)

      for f <- [&Nx.exp(Nx.negate(Nx.abs(&1))), &Nx.sqrt(Nx.abs(&1)), &Nx.sum/1, &Nx.cumulative_sum/1] do
        check(f, [h], exact: true)
        assert_received {:host, _}
      end

      # f64 with a GPU f32: Nx's type rules give f64, on the host; a comparison's u8 comes back
      # to the GPU.
      x = host([1.5, -2.0, 0.25, 4.0])
      check(&Nx.add/2, [x, h], exact: true)
      less = check(&Nx.less/2, [h, x])
      assert %Kiln.Backend{ref: %Kiln.Tensor{}} = less.data
      assert Nx.to_binary(Nx.backend_transfer(t, Nx.BinaryBackend)) == Nx.to_binary(h)
      assert inspect(t) == inspect(h)
    end

    test "host-held tensors through transfer, batching, vectorization and Nx.Defn" do
      h = host([[0.5, -1.0], [2.0, 3.5], [1.0e300, 0.0]], type: :f64)
      t = gpu(h)
      assert %Kiln.Backend{ref: nil} = t.data

      # batches of a host-held tensor are host-held too, and equal Nx.BinaryBackend's
      got = t |> Nx.to_batched(2, leftover: :repeat) |> Enum.to_list()
      want = h |> Nx.to_batched(2, leftover: :repeat) |> Enum.to_list()
      assert Enum.map(got, &Nx.to_binary/1) == Enum.map(want, &Nx.to_binary/1)
      assert Enum.all?(got, &match?(%Kiln.Backend{ref: nil}, &1.data))

      check(&Nx.sum(Nx.vectorize(&1, :rows), axes: [0]), [h], exact: true)

      check(Nx.Defn.jit(fn x -> x |> Nx.multiply(2) |> Nx.subtract(1) |> Nx.sum(axes: [1]) end), [h],
        exact: true
      )

      c = Nx.backend_copy(t, Kiln.Backend)
      assert Nx.to_binary(c) == Nx.to_binary(h)
      moved = Nx.backend_transfer(t, Nx.BinaryBackend)
      assert %Nx.BinaryBackend{} = moved.data
      assert Nx.to_binary(moved) == Nx.to_binary(h)
      assert Nx.backend_deallocate(c) == :ok
    end

    test "complex, bf16, f8 and sub-byte integers give Nx.BinaryBackend's results" do
      c = host([Complex.new(1.0, 2.0), Complex.new(-0.5, 0.0)])
      assert c.type == {:c, 64}
      r = host([1.5, -2.0])

      for f <- [&Nx.multiply(&1, &1), &Nx.exp/1, &Nx.conjugate/1, &Nx.sum/1, &Nx.real/1] do
        check(f, [c], exact: true)
      end

      # complex in, a GPU type out: computed on the host, the result back on the GPU.
      abs = check(&Nx.abs/1, [c], exact: true)
      assert %Kiln.Backend{ref: %Kiln.Tensor{}} = abs.data
      check(&Nx.add/2, [c, r], exact: true)
      check(&Nx.complex/2, [r, r], exact: true)

      for type <- [:bf16, :f8, {:s, 4}, {:u, 2}] do
        t = host([1, 2, -1, 0], type: type)
        check(&Nx.add(&1, &1), [t], exact: true)
        check(&Nx.as_type(&1, :f32), [t], exact: true)
        # (Nx 0.11 cannot inspect a sub-byte tensor of an odd byte count on any backend.)
        if type in [:bf16, :f8], do: assert(inspect(gpu(t)) == inspect(t))
      end

      assert_received {:host, :multiply}
    end
  end

  # Reports this process's host calls (Kiln.Backend's telemetry event) as {:host, callback}.
  defp watch_host_calls(context) do
    me = self()
    id = {__MODULE__, context.test}

    :telemetry.attach(id, [:kiln, :backend, :host], &__MODULE__.forward_host/4, me)

    on_exit(fn -> :telemetry.detach(id) end)
    :ok
  end

  def forward_host(_event, _measurements, meta, me),
    do: if(self() == me, do: send(me, {:host, meta.callback}))

  describe "the GPU path" do
    setup :watch_host_calls

    test "the callbacks the module doc calls GPU ones make no host call" do
      f = host([[1.5, -2.0, 0.25], [4.0, 0.5, -1.0]])
      i = host([[3, -1, 2], [0, 7, -4]], type: :s32)
      run = fn fun, args -> apply(fun, Enum.map(args, &gpu/1)) end

      for fun <- [&Nx.add/2, &Nx.multiply/2, &Nx.pow/2, &Nx.less/2, &Nx.max/2, &Nx.atan2/2],
          do: run.(fun, [f, f])

      for fun <- [&Nx.add/2, &Nx.bitwise_xor/2, &Nx.left_shift/2, &Nx.equal/2], do: run.(fun, [i, Nx.abs(i)])
      for fun <- [&Nx.exp/1, &Nx.round/1, &Nx.sign/1, &Nx.is_nan/1, &Nx.negate/1], do: run.(fun, [f])

      for fun <- [&Nx.sum(&1, axes: [1]), &Nx.reduce_max/1, &Nx.argmax(&1, axis: 0), &Nx.all/1],
          do: run.(fun, [i])

      run.(&Nx.dot/2, [f, Nx.transpose(f)])
      run.(&Nx.dot/2, [i, Nx.transpose(i)])
      run.(&Nx.dot(&1, [2], [0], &2, [1], [0]), [Nx.reshape(f, {2, 1, 3}), Nx.reshape(f, {2, 3, 1})])
      run.(&Nx.conv/2, [Nx.reshape(f, {1, 1, 2, 3}), Nx.reshape(f, {1, 1, 2, 3})])
      run.(&Nx.pad(&1, 0.0, [{1, -1, 0}, {0, 2, 0}]), [f])
      run.(&Nx.put_slice(&1, [0, 1], Nx.tensor([[9.0]])), [f])
      run.(&Nx.window_max(&1, {1, 1, 1, 2}), [Nx.reshape(f, {1, 1, 2, 3})])
      run.(&Nx.window_sum(&1, {1, 1, 2, 2}), [Nx.reshape(f, {1, 1, 2, 3})])
      run.(&Nx.gather(&1, Nx.tensor([[1, 0], [0, 2]])), [f])
      run.(&(Nx.to_batched(&1, 1) |> Enum.to_list()), [f])
      run.(&Nx.quotient/2, [i, Nx.add(Nx.abs(i), 1)])
      run.(&Nx.remainder/2, [i, Nx.add(Nx.abs(i), 1)])
      run.(&Nx.indexed_add(&1, Nx.tensor([[0, 1], [0, 1]]), Nx.tensor([1.0, 2.0])), [f])
      run.(&Nx.indexed_put(&1, Nx.tensor([[1, 2]]), Nx.tensor([5.0])), [f])
      run.(&Nx.erf/1, [f])
      run.(&Nx.erf_inv/1, [Nx.divide(f, 5.0)])
      run.(&Nx.bitcast(&1, :u32), [f])
      run.(&Nx.population_count/1, [i])
      run.(&Nx.count_leading_zeros/1, [i])
      run.(&Nx.cbrt/1, [f])
      run.(&Nx.sort(&1, axis: 1), [f])
      run.(&Nx.argsort(&1, axis: 1), [i])
      run.(&Nx.cumulative_sum(&1, axis: 1, reverse: true), [i])
      run.(&Nx.take(&1, Nx.tensor([1, 0]), axis: 1), [f])
      run.(&Nx.as_type(&1, :u8), [i])
      _ = Nx.iota({2, 3}, backend: Kiln.Backend)
      _ = Nx.eye(3, backend: Kiln.Backend)
      refute_received {:host, _}
    end
  end

  describe "the host path" do
    setup :watch_host_calls

    # Nx.BinaryBackend calls reduce's function with host tensors; a tensor the function makes
    # (Nx.tensor/1 here) must be a host one too, even with Kiln.Backend as the default.
    test "reduce and window_reduce functions that make tensors, with Kiln.Backend the default" do
      x = host([[1.0, -2.0, 3.5], [0.5, 4.0, -1.0]])
      f = fn a, b -> Nx.add(a, Nx.multiply(b, Nx.tensor(2.0))) end
      want = Nx.reduce(x, 0.0, [axes: [1]], f)
      wwant = Nx.window_reduce(x, 0.0, {1, 2}, f)

      Nx.with_default_backend(Kiln.Backend, fn ->
        compare(Nx.reduce(gpu(x), 0.0, [axes: [1]], f), want, exact: true)
        compare(Nx.window_reduce(gpu(x), 0.0, {1, 2}, f), wwant, exact: true)
      end)
    end

    test "Nx.LinAlg's decompositions and solvers run on the host, Nx.BinaryBackend's bit for bit" do
      a = host([[4.0, 1.0, 2.0], [1.0, 3.0, 0.5], [2.0, 0.5, 5.0]])
      b = host([1.0, -2.0, 0.5])

      for f <-
            [&Nx.LinAlg.qr/1, &Nx.LinAlg.lu/1, &Nx.LinAlg.cholesky/1, &Nx.LinAlg.determinant/1] ++
              [&Nx.LinAlg.eigh/1, &Nx.LinAlg.svd/1, &Nx.LinAlg.solve(&1, b)] do
        check(f, [a], exact: true)
      end

      for name <- [:qr, :lu, :cholesky, :determinant, :eigh, :svd, :solve],
          do: assert_received({:host, ^name})

      # batched
      check(&Nx.LinAlg.qr/1, [Nx.stack([a, Nx.multiply(a, 2.0)])], exact: true)
    end

    test "callbacks Kiln has no kernel for run through Nx.BinaryBackend and come back" do
      assert {:window_product, 4} in Kiln.Backend.fallbacks()
      # The module doc's table names every host callback in its host row, and only there.
      {:docs_v1, _, _, _, %{"en" => doc}, _, _} = Code.fetch_docs(Kiln.Backend)
      [host_row] = doc |> String.split("\n") |> Enum.filter(&(&1 =~ "| host (`Nx.BinaryBackend`)"))
      other_rows = doc |> String.split("\n") |> Enum.filter(&(&1 =~ "| GPU"))

      for {name, _} <- Kiln.Backend.fallbacks() do
        assert host_row =~ "`#{name}`"
        refute Enum.any?(other_rows, &(&1 =~ "`#{name}`")), "#{name} is in a GPU row"
      end

      assert length(Regex.scan(~r/`[a-z_0-9]+`/, host_row)) == length(Kiln.Backend.fallbacks())
      refute {:add, 3} in Kiln.Backend.fallbacks()
      x = host([[1.0, 8.0, -27.0], [0.0, 2.0, 3.0]])
      check(&Nx.remainder/2, [x, host(0.7)])
      assert_received {:host, :remainder}
      check(&Nx.window_sum(&1, {1, 2}), [x])
      assert_received {:host, :window_sum}
      check(&Nx.window_product(&1, {1, 2}), [x])
      assert_received {:host, :window_product}
      check(&Nx.window_scatter_max(&1, Nx.tensor([[2.0]]), 0.0, {2, 3}), [x])
      assert_received {:host, :window_scatter_max}
      check(&Nx.reduce(&1, 0.0, [axes: [1]], fn a, b -> Nx.add(a, b) end), [x])

      # A result of a type Kiln cannot hold (complex) stays on the host, as a Kiln.Backend tensor.
      f = Nx.fft(gpu(host([1.0, 0.0, 0.0, 0.0])))
      assert f.type == {:c, 64}
      assert %Kiln.Backend{ref: nil} = f.data
      assert Nx.to_binary(f) == Nx.to_binary(Nx.fft(host([1.0, 0.0, 0.0, 0.0])))
    end
  end

  describe "Nx.Defn" do
    import Nx.Defn

    defn softmax(x) do
      e = Nx.exp(x - Nx.reduce_max(x, axes: [-1], keep_axes: true))
      e / Nx.sum(e, axes: [-1], keep_axes: true)
    end

    defn dense(x, w, b) do
      Nx.tanh(Nx.dot(x, w) + b)
    end

    # Two layers as Axon builds them: GELU (erf form, Axon's default), then a softmax.
    defn mlp(x, w1, b1, w2, b2) do
      h = Nx.dot(x, w1) + b1
      h = h * 0.5 * (1 + Nx.erf(h / Nx.sqrt(2)))
      softmax(Nx.dot(h, w2) + b2)
    end

    defn(xent(w, x, y), do: -Nx.mean(Nx.sum(y * Nx.log(mlp(x, w, 0.0, Nx.eye(4), 0.0)), axes: [-1])))
    defn(xent_grad(w, x, y), do: grad(w, &xent(&1, x, y)))

    test "a softmax and a dense layer under the default evaluator" do
      x = host([[1.0, 2.0, 3.0, -1.0], [0.0, 0.0, 0.0, 0.0], [-50.0, 50.0, 0.0, 1.0e-3]])
      out = check(&softmax/1, [x])
      assert Nx.Defn.default_options()[:compiler] in [nil, Nx.Defn.Evaluator]
      assert %Kiln.Backend{} = out.data

      w = host(Enum.map(1..8, &(&1 / 10))) |> Nx.reshape({4, 2})
      check(&dense/3, [x, w, host([0.5, -0.5])])

      # jit with the evaluator named, on inputs of both backends (the host one is uploaded).
      jitted = Nx.Defn.jit(&dense/3, compiler: Nx.Defn.Evaluator)
      got = jitted.(gpu(x), w, gpu(host([0.5, -0.5])))
      assert %Kiln.Backend{} = got.data
      compare(got, dense(x, w, host([0.5, -0.5])), [])
    end

    test "a two-layer GELU MLP runs entirely on the GPU" do
      :telemetry.attach({__MODULE__, :mlp}, [:kiln, :backend, :host], &__MODULE__.forward_host/4, self())
      on_exit(fn -> :telemetry.detach({__MODULE__, :mlp}) end)
      :rand.seed(:exsss, {4, 5, 6})

      r = fn shape ->
        host(for(_ <- 1..Tuple.product(shape), do: :rand.normal() * 0.5)) |> Nx.reshape(shape)
      end

      args = [r.({5, 8}), r.({8, 16}), r.({16}), r.({16, 3}), r.({3})]
      out = check(&mlp/5, args, tol: 2.0e-6)
      assert Nx.to_flat_list(Nx.sum(out, axes: [1])) |> Enum.all?(&(abs(&1 - 1.0) < 1.0e-5))

      # Its gradient (Nx.Defn.grad: the backward pass of erf, softmax, dot) as well.
      check(&xent_grad/3, [r.({8, 4}), hd(args), Nx.eye({5, 4}, backend: Nx.BinaryBackend)], tol: 1.0e-5)
      refute_received {:host, _}
    end

    test "Nx.default_backend(Kiln.Backend) puts new tensors on the GPU" do
      Nx.default_backend(Kiln.Backend)
      t = Nx.tensor([1.0, 2.0]) |> Nx.multiply(2)
      assert %Kiln.Backend{} = t.data
      assert Nx.to_list(t) == [2.0, 4.0]
      assert inspect(t) =~ "f32[2]"
      assert inspect(t) =~ "[2.0, 4.0]"
    end
  end

  describe "errors" do
    test "bad input raises, and the VM and the device carry on" do
      t = gpu(host([1.0, 2.0]))
      assert :ok = Nx.backend_deallocate(t)
      assert :already_deallocated = Nx.backend_deallocate(t)
      assert_raise Kiln.Error, ~r/freed/, fn -> Nx.add(t, 1.0) end
      assert_raise ArgumentError, fn -> Nx.add(gpu(host([1.0, 2.0])), gpu(host([1.0, 2.0, 3.0]))) end
      assert_raise ArgumentError, ~r/takes no options/, fn -> Nx.default_backend({Kiln.Backend, foo: 1}) end
      # Past Kiln's limits: rank 9 (Nx has no rank limit, Kiln 8) and a 10 GB broadcast.
      assert_raise Kiln.Error, ~r/rank 9/, fn ->
        Nx.iota({1, 1, 1, 1, 1, 1, 1, 1, 2}, backend: Kiln.Backend)
      end

      assert_raise Kiln.Error, ~r/out_of_memory/, fn ->
        Nx.broadcast(Nx.tensor(1.0, backend: Kiln.Backend), {50_000, 50_000})
      end

      # A freed tensor on the host path raises too, and the device carries on.
      assert_raise Kiln.Error, ~r/freed/, fn -> Nx.cbrt(t) end
      c = Nx.backend_copy(gpu(host([1.0, -0.0])), Kiln.Backend)
      assert %Kiln.Backend{} = c.data
      assert Nx.to_list(Nx.add(c, 1.0)) == [2.0, 1.0]
    end

    test "backend_copy keeps the source, inspect reads only what it shows" do
      t = gpu(host(Enum.map(1..3000, &(&1 * 1.0))))
      h = Nx.backend_copy(t, Nx.BinaryBackend)
      assert %Nx.BinaryBackend{} = h.data
      assert Nx.to_binary(h) == Nx.to_binary(t)
      assert Nx.to_flat_list(Nx.add(t, 1.0)) |> Enum.take(2) == [2.0, 3.0]
      assert inspect(t) == inspect(h) |> String.replace("Nx.BinaryBackend", "Kiln.Backend")
      assert byte_size(Nx.to_binary(t, limit: 7)) == 28
      # A vectorized tensor's limit counts all its elements, as Nx.BinaryBackend's does.
      v = host([[1, 2, 3], [4, 5, 6]], type: :s32) |> Nx.vectorize(:x)
      assert Nx.to_binary(gpu(v), limit: 4) == Nx.to_binary(v, limit: 4)
      assert Nx.to_flat_list(gpu(v), limit: 5) == Nx.to_flat_list(v, limit: 5)
      assert inspect(gpu(v)) == inspect(v)

      assert Nx.to_binary(gpu(host([1, -2, 3], type: :s16)), limit: 2) ==
               <<1::16-signed-native, -2::16-signed-native>>
    end

    test "bitcast, and Nx.Random (bitcast, erf_inv) on the GPU with the host's numbers" do
      bits = host([0x3F800000, 0x7F800000, 0xFFC00000, 0x80000000, 1], type: :u32)
      check(&Nx.bitcast(&1, :f32), [bits], exact: true)
      check(&Nx.bitcast(&1, :s32), [bits])
      check(&Nx.bitcast(&1, :u32), [host([-0.0, 1.5, :neg_infinity])])
      check(&Nx.bitcast(&1, :u16), [host([1.0, -2.0], type: :f16)])

      :telemetry.attach({__MODULE__, :random}, [:kiln, :backend, :host], &__MODULE__.forward_host/4, self())
      on_exit(fn -> :telemetry.detach({__MODULE__, :random}) end)
      key = Nx.Random.key(42)
      {u, k2} = Nx.Random.uniform(gpu(key), shape: {64})
      {n, _} = Nx.Random.normal(k2, shape: {64})
      {u_want, k2_want} = Nx.Random.uniform(key, shape: {64})
      {n_want, _} = Nx.Random.normal(k2_want, shape: {64})
      compare(u, u_want, exact: true)
      compare(n, n_want, tol: 2.0e-6)
      refute_received {:host, _}
    end

    test "many processes at once, custom kernels included" do
      x = host(Enum.map(1..64, &(:math.sin(&1) * 2.0))) |> Nx.reshape({8, 8})

      f = fn t ->
        t |> Nx.erf() |> Nx.dot(t) |> Nx.indexed_add(Nx.tensor([[0, 0], [7, 7]]), Nx.tensor([1.0, 2.0]))
      end

      want = f.(x)

      1..8
      |> Task.async_stream(fn _ -> f.(gpu(x)) end, max_concurrency: 8, timeout: 60_000)
      |> Enum.each(fn {:ok, got} -> compare(got, want, tol: 1.0e-5) end)
    end

    test "backend_transfer to the host and back" do
      t = gpu(host([[1, 2], [3, 4]], type: :s16))
      h = Nx.backend_transfer(t, Nx.BinaryBackend)
      assert %Nx.BinaryBackend{} = h.data
      assert Nx.to_list(h) == [[1, 2], [3, 4]]
      assert Nx.backend_deallocate(t) == :already_deallocated
      assert Nx.to_list(Nx.backend_transfer(h, Kiln.Backend)) == [[1, 2], [3, 4]]
    end
  end
end
