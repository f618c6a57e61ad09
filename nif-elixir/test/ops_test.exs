defmodule KilnOpsTest do
  # Every op family against an independent reference computed here in Elixir (f64), on random
  # inputs and awkward shapes (empty, 1, primes, more than one workgroup).
  use ExUnit.Case, async: true
  import Kiln.Ref

  setup do
    :rand.seed(:exsss, {1, 2, 3})
    :ok
  end

  defp t(vals, shape, type \\ {:f, 32}),
    do: Kiln.tensor(vals, type: type) |> Kiln.reshape(List.to_tuple(shape))

  defp f32(x),
    do:
      (
        <<y::float-32>> = <<x::float-32>>
        y
      )

  defp rand_f32(n, lo \\ -1.0, hi \\ 1.0), do: rand_list(n, lo, hi) |> Enum.map(&f32/1)

  describe "creation" do
    test "zeros ones full arange empty fill copy" do
      for type <- [{:f, 32}, {:s, 32}, {:u, 32}] do
        assert Kiln.zeros({3, 5}, type: type) |> flat() ==
                 List.duplicate(0, 15) |> Enum.map(&(&1 * one(type)))

        assert Kiln.ones({257}, type: type) |> flat() == List.duplicate(one(type), 257)
        assert Kiln.full({2, 3}, 9, type: type) |> flat() == List.duplicate(9 * one(type), 6)
      end

      assert Kiln.zeros({0, 4}) |> Kiln.shape() == {0, 4}
      assert Kiln.arange(-3, 10, step: 3) |> flat() == [-3, 0, 3, 6, 9]
      assert Kiln.arange(10, 0, step: -4) |> flat() == [10, 6, 2]
      assert Kiln.arange(0, 0) |> Kiln.shape() == {0}
      assert Kiln.arange(0.0, 1.0, step: 0.125) |> flat() == Enum.map(0..7, &(&1 * 0.125))
      assert_raise Kiln.Error, ~r/invalid_argument/, fn -> Kiln.arange(0, 1, step: 0) end

      e = Kiln.empty({4}, type: {:s, 32})
      assert e |> Kiln.fill(-7) |> flat() == [-7, -7, -7, -7]
      c = Kiln.copy(e)
      Kiln.fill(e, 1)
      assert flat(c) == [-7, -7, -7, -7]
      assert flat(e) == [1, 1, 1, 1]
    end
  end

  defp one({:f, _}), do: 1.0
  defp one(_), do: 1

  describe "elementwise" do
    test "unary ops on f32 match :math" do
      x = rand_f32(1031, -3.0, 3.0)
      pos = rand_f32(1031, 0.05, 4.0)
      erf = fn v -> :math.erf(v) end

      refs = [
        neg: {x, &(-&1)},
        abs: {x, &Kernel.abs/1},
        exp: {x, &:math.exp/1},
        log: {pos, &:math.log/1},
        sqrt: {pos, &:math.sqrt/1},
        rsqrt: {pos, &(1 / :math.sqrt(&1))},
        sin: {x, &:math.sin/1},
        cos: {x, &:math.cos/1},
        tanh: {x, &:math.tanh/1},
        sigmoid: {x, &(1 / (1 + :math.exp(-&1)))},
        relu: {x, &Kernel.max(&1, 0.0)},
        gelu: {x, &(0.5 * &1 * (1 + erf.(&1 / :math.sqrt(2))))},
        gelu_tanh: {x, &(0.5 * &1 * (1 + :math.tanh(0.7978845608028654 * (&1 + 0.044715 * &1 * &1 * &1))))},
        silu: {x, &(&1 / (1 + :math.exp(-&1)))}
      ]

      for {op, {input, f}} <- refs do
        got = apply(Kiln, op, [t(input, [1031])]) |> flat()
        assert_close(got, Enum.map(input, f), 2.0e-5, 2.0e-5)
        # The generic form reaches the same kernel.
        assert Kiln.unary(op, t(Enum.take(input, 3), [3])) |> flat() == Enum.take(got, 3)
      end
    end

    test "integer unary ops" do
      i = rand_ints(67, -50, 50)
      assert Kiln.neg(t(i, [67], {:s, 32})) |> flat() == Enum.map(i, &(-&1))
      assert Kiln.abs(t(i, [67], {:s, 32})) |> flat() == Enum.map(i, &Kernel.abs/1)
      assert Kiln.relu(t(i, [67], {:s, 32})) |> flat() == Enum.map(i, &Kernel.max(&1, 0))
    end

    test "binary ops broadcast like numpy" do
      for {as, bs} <- [{[3, 1, 5], [4, 1]}, {[7], [7]}, {[], [2, 3]}, {[0, 3], [3]}, {[2, 1, 130], [1, 3, 1]}] do
        a = rand_f32(numel(as), 0.5, 2.0)
        b = rand_f32(numel(bs), 0.5, 2.0)

        fs = [
          add: &+/2,
          sub: &-/2,
          mul: &*/2,
          div: &//2,
          pow: &:math.pow/2,
          maximum: &Kernel.max/2,
          minimum: &Kernel.min/2
        ]

        for {op, f} <- fs do
          out = apply(Kiln, op, [t(a, as), t(b, bs)])
          {want, os} = binary(a, as, b, bs, f)
          assert Tuple.to_list(Kiln.shape(out)) == os
          assert_close(flat(out), want, 1.0e-5, 1.0e-6)
        end

        for {op, f} <- [eq: &==/2, ne: &!=/2, lt: &</2, le: &<=/2, gt: &>/2, ge: &>=/2] do
          out = apply(Kiln, op, [t(a, as), t(b, bs)])
          assert Kiln.type(out) == {:u, 8}
          {want, _} = binary(a, as, b, bs, fn x, y -> if f.(x, y), do: 1, else: 0 end)
          assert flat(out) == want
        end
      end
    end

    test "integer binary ops and scalars on either side" do
      a = rand_ints(101, -1000, 1000)
      b = rand_ints(101, 1, 30)
      ta = t(a, [101], {:s, 32})
      tb = t(b, [101], {:s, 32})
      assert Kiln.add(ta, tb) |> flat() == Enum.zip_with(a, b, &+/2)
      assert Kiln.mul(ta, tb) |> flat() == Enum.zip_with(a, b, &*/2)
      # Integer div is floor division (numpy's //, every binding's rule), not WGSL's truncation.
      assert Kiln.div(ta, tb) |> flat() == Enum.zip_with(a, b, &Integer.floor_div/2)
      assert Kiln.sub(ta, 5) |> flat() == Enum.map(a, &(&1 - 5))
      assert Kiln.sub(5, ta) |> flat() == Enum.map(a, &(5 - &1))
      assert Kiln.sub_scalar(ta, 5) |> flat() == Enum.map(a, &(&1 - 5))
      assert Kiln.gt(ta, 0) |> flat() == Enum.map(a, &if(&1 > 0, do: 1, else: 0))
      assert Kiln.binary(:maximum, ta, tb) |> flat() == Enum.zip_with(a, b, &Kernel.max/2)
      assert Kiln.add(1, 2.5) |> Kiln.to_number() == 3.5
    end

    test "where and cast" do
      c = rand_ints(40, 0, 2)
      a = rand_f32(40)
      b = rand_f32(8)
      out = Kiln.where(t(c, [5, 8], {:u, 32}), t(a, [5, 8]), t(b, [8]))

      want =
        for {ci, i} <- Enum.with_index(c), do: if(ci != 0, do: Enum.at(a, i), else: Enum.at(b, rem(i, 8)))

      assert flat(out) == want

      x = rand_f32(33, -5.0, 5.0)
      assert Kiln.cast(t(x, [33]), {:s, 32}) |> flat() == Enum.map(x, &trunc/1)
      assert Kiln.cast(t([3, -1], [2], {:s, 32}), {:f, 32}) |> flat() == [3.0, -1.0]
      # WGSL saturates to the largest f32 below 2^32.
      assert Kiln.as_type(t([1.0e10, -3.0], [2]), {:u, 32}) |> flat() == [4_294_967_040, 0]
    end

    test "bool ({:u, 8}): in and out, logical ops, predicates, all/any, where, cast" do
      truth = fn x -> if x in [0, +0.0, -0.0], do: 0, else: 1 end

      for n <- [0, 1, 7, 1031] do
        a = rand_ints(n, 0, 1)
        b = rand_ints(n, -2, 2)
        ta = t(a, [n], {:u, 8})
        tb = t(b, [n], {:s, 32})
        assert Kiln.type(ta) == {:u, 8}
        assert flat(ta) == a
        assert Kiln.to_binary(ta) == :erlang.list_to_binary(a)
        tbb = Kiln.cast(tb, {:u, 8})
        assert flat(tbb) == Enum.map(b, truth)
        assert Kiln.logical_and(ta, tbb) |> flat() == Enum.zip_with(a, b, &(&1 * truth.(&2)))
        assert Kiln.logical_or(ta, tbb) |> flat() == Enum.zip_with(a, b, &max(&1, truth.(&2)))

        assert Kiln.logical_xor(ta, tbb) |> flat() ==
                 Enum.zip_with(a, b, &if(&1 != truth.(&2), do: 1, else: 0))

        assert Kiln.logical_not(tb) |> flat() == Enum.map(b, &(1 - truth.(&1)))
        assert Kiln.all(ta) |> Kiln.to_number() == if(Enum.all?(a, &(&1 == 1)), do: 1, else: 0)
        assert Kiln.any(tb) |> Kiln.to_number() == if(Enum.any?(b, &(&1 != 0)), do: 1, else: 0)
        assert Kiln.type(Kiln.equal(tb, 0)) == {:u, 8}
      end

      # Host values other than 0/1 are true.
      assert Kiln.from_binary(<<0, 1, 2, 255>>, {:u, 8}, {4}) |> flat() == [0, 1, 1, 1]
      assert Kiln.tensor([true, false, true]) |> Kiln.type() == {:u, 8}
      assert Kiln.tensor([[true, false], [false, false]]) |> Kiln.any(axes: [1]) |> flat() == [1, 0]
      x = Kiln.tensor([:nan, -0.0, :infinity, :neg_infinity, 1.0, 0.0])
      assert Kiln.is_nan(x) |> flat() == [1, 0, 0, 0, 0, 0]
      assert Kiln.is_infinity(x) |> flat() == [0, 0, 1, 1, 0, 0]
      assert Kiln.is_finite(x) |> flat() == [0, 1, 0, 0, 1, 1]
      assert Kiln.signbit(x) |> flat() == [0, 1, 0, 1, 0, 0]
      assert Kiln.cast(x, {:u, 8}) |> flat() == [1, 0, 1, 1, 1, 0]
      c = Kiln.tensor([true, false, true, false, true, false])
      assert Kiln.where(c, x, 7.0) |> flat() == [:nan, 7.0, :infinity, 7.0, 1.0, 7.0]
      assert Kiln.all(Kiln.tensor([], type: {:u, 8})) |> Kiln.to_number() == 1
      assert Kiln.argmax(x) |> Kiln.type() == {:s, 32}

      err = assert_raise Kiln.Error, fn -> Kiln.add(c, c) end
      assert err.code == :dtype_mismatch
      err = assert_raise Kiln.Error, fn -> Kiln.full({2}, 2, type: {:u, 8}) end
      assert err.code == :invalid_argument
    end
  end

  describe "random" do
    test "uniform and normal: deterministic, in range, right moments" do
      u = Kiln.random_uniform({4096}, seed: 42, low: -2.0, high: 3.0)
      vals = flat(u)
      assert Enum.all?(vals, &(&1 >= -2.0 and &1 < 3.0))
      assert_in_delta mean(vals), 0.5, 0.1
      assert flat(Kiln.random_uniform({4096}, seed: 42, low: -2.0, high: 3.0)) == vals
      assert flat(Kiln.random_uniform({4096}, seed: 43, low: -2.0, high: 3.0)) != vals

      n = Kiln.random_normal({4096}, seed: 7, mean: 1.0, std: 2.0) |> flat()
      assert_in_delta mean(n), 1.0, 0.15
      assert_in_delta :math.sqrt(var(n)), 2.0, 0.15

      assert_raise Kiln.Error, ~r/dtype_mismatch|invalid_argument|unsupported/, fn ->
        Kiln.random_normal({3}, type: {:s, 32})
      end
    end
  end

  describe "matmul" do
    test "2-D, 1-D promotion, batched with broadcasting" do
      for {m, k, n} <- [{1, 1, 1}, {3, 5, 7}, {17, 13, 67}, {64, 33, 2}] do
        a = rand_f32(m * k)
        b = rand_f32(k * n)
        out = Kiln.matmul(t(a, [m, k]), t(b, [k, n]))
        assert Kiln.shape(out) == {m, n}
        assert_close(flat(out), matmul2(a, [m, k], b, [k, n]), 1.0e-4, 1.0e-5)
      end

      a = rand_f32(2 * 3 * 4)
      b = rand_f32(4 * 5)
      out = Kiln.matmul(t(a, [2, 3, 4]), t(b, [4, 5]))
      assert Kiln.shape(out) == {2, 3, 5}
      want = Enum.flat_map(Enum.chunk_every(a, 12), &matmul2(&1, [3, 4], b, [4, 5]))
      assert_close(flat(out), want)

      v = rand_f32(4)
      out = Kiln.matmul(t(b, [4, 5]) |> Kiln.transpose(0, 1), t(v, [4]))
      assert Kiln.shape(out) == {5}
      {bt, _} = permute(b, [4, 5], [1, 0])
      assert_close(flat(out), matmul2(bt, [5, 4], v, [4, 1]))

      assert_raise Kiln.Error, ~r/shape_mismatch/, fn -> Kiln.matmul(t(a, [2, 3, 4]), t(a, [2, 3, 4])) end
    end
  end

  describe "reduce" do
    test "sum mean max min var over axes, keep_axes" do
      shape = [3, 5, 7]
      x = rand_f32(105)
      tx = t(x, shape)

      for axes <- [nil, [0], [-1], [0, 2], [1]], keep <- [false, true] do
        for {op, f} <- [sum: &Enum.sum/1, mean: &mean/1, max: &Enum.max/1, min: &Enum.min/1, var: &var/1] do
          out = apply(Kiln, op, [tx, [axes: axes, keep_axes: keep]])
          {want, os} = reduce(x, shape, axes, keep, f)
          assert Tuple.to_list(Kiln.shape(out)) == os, "#{op} #{inspect(axes)}"
          assert_close(flat(out), want, 1.0e-4, 1.0e-5)
        end
      end

      out = Kiln.var(tx, axes: [1], ddof: 1)
      {want, _} = reduce(x, shape, [1], false, &var(&1, 1))
      assert_close(flat(out), want)

      big = rand_f32(5000)
      assert_close(flat(Kiln.sum(t(big, [5000]))), [Enum.sum(big)], 1.0e-4, 1.0e-3)
      assert Kiln.sum(t([1, 2, 3], [3], {:s, 32})) |> Kiln.to_number() == 6
      assert_raise Kiln.Error, ~r/invalid_argument/, fn -> Kiln.sum(tx, axes: [3]) end
    end

    test "argmax argmin" do
      x = rand_f32(35)
      tx = t(x, [5, 7])
      am = fn l -> Enum.find_index(l, &(&1 == Enum.max(l))) end
      an = fn l -> Enum.find_index(l, &(&1 == Enum.min(l))) end
      assert Kiln.argmax(tx) |> Kiln.to_number() == am.(x)
      assert Kiln.argmin(tx) |> Kiln.to_number() == an.(x)
      {want, _} = reduce(x, [5, 7], [1], false, am)
      assert Kiln.argmax(tx, axis: 1) |> flat() == want
      {want, _} = reduce(x, [5, 7], [0], true, an)
      out = Kiln.argmin(tx, axis: 0, keep_axis: true)
      assert {Kiln.shape(out), Kiln.type(out), flat(out)} == {{1, 7}, {:s, 32}, want}
    end
  end

  describe "norm" do
    test "softmax, log_softmax along any axis" do
      shape = [4, 3, 9]
      x = rand_f32(108, -4.0, 4.0)

      for axis <- [-1, 0, 1] do
        assert_close(Kiln.softmax(t(x, shape), axis: axis) |> flat(), lanes(x, shape, axis, &softmax/1))
        want = lanes(x, shape, axis, fn l -> Enum.map(softmax(l), &:math.log/1) end)
        assert_close(Kiln.log_softmax(t(x, shape), axis: axis) |> flat(), want)
      end

      assert_raise Kiln.Error, ~r/invalid_argument/, fn -> Kiln.softmax(t(x, shape), axis: 3) end
    end

    test "layer_norm, rms_norm, batch_norm" do
      shape = [6, 37]
      x = rand_f32(222, -2.0, 2.0)
      w = rand_f32(37)
      b = rand_f32(37)

      ln = fn l ->
        m = mean(l)
        s = :math.sqrt(var(l) + 1.0e-5)
        Enum.map(l, &((&1 - m) / s))
      end

      want = lanes(x, shape, -1, fn l -> ln.(l) |> Enum.zip_with(w, &*/2) |> Enum.zip_with(b, &+/2) end)

      assert_close(
        Kiln.layer_norm(t(x, shape), weight: t(w, [37]), bias: t(b, [37])) |> flat(),
        want,
        1.0e-4,
        1.0e-4
      )

      assert_close(Kiln.layer_norm(t(x, shape)) |> flat(), lanes(x, shape, -1, ln), 1.0e-4, 1.0e-4)

      rms = fn l ->
        r = :math.sqrt(mean(Enum.map(l, &(&1 * &1))) + 1.0e-6)
        Enum.map(l, &(&1 / r))
      end

      want = lanes(x, shape, -1, fn l -> rms.(l) |> Enum.zip_with(w, &*/2) end)
      assert_close(Kiln.rms_norm(t(x, shape), weight: t(w, [37])) |> flat(), want, 1.0e-4, 1.0e-4)

      # batch_norm: x [N, C, H, W], stats [C]
      xs = [2, 3, 4, 5]
      xb = rand_f32(120)
      mu = rand_f32(3)
      va = rand_f32(3, 0.5, 2.0)
      g = rand_f32(3)
      be = rand_f32(3)

      want =
        for {v, i} <- Enum.with_index(xb) do
          c = Enum.at(coords(i, xs), 1)
          (v - Enum.at(mu, c)) / :math.sqrt(Enum.at(va, c) + 1.0e-5) * Enum.at(g, c) + Enum.at(be, c)
        end

      out = Kiln.batch_norm(t(xb, xs), t(mu, [3]), t(va, [3]), weight: t(g, [3]), bias: t(be, [3]))
      assert_close(flat(out), want, 1.0e-4, 1.0e-4)
      assert_raise Kiln.Error, fn -> Kiln.batch_norm(t(xb, xs), t(mu, [3]), t(va ++ [1.0], [4])) end
    end
  end

  describe "conv and pool" do
    def conv_ref(x, [n, c, h, w], wt, [o, cg, kh, kw], bias, [sh, sw], [ph, pw], [dh, dw], groups) do
      oh = div(h + 2 * ph - dh * (kh - 1) - 1, sh) + 1
      ow = div(w + 2 * pw - dw * (kw - 1) - 1, sw) + 1
      tx = List.to_tuple(x)
      tw = List.to_tuple(wt)
      og = div(o, groups)

      vals =
        for ni <- 0..(n - 1), oi <- 0..(o - 1), y <- 0..(oh - 1)//1, xx <- 0..(ow - 1)//1 do
          gi = div(oi, og)

          s =
            for ci <- 0..(cg - 1), ky <- 0..(kh - 1), kx <- 0..(kw - 1), reduce: 0.0 do
              acc ->
                iy = y * sh - ph + ky * dh
                ix = xx * sw - pw + kx * dw

                if iy < 0 or ix < 0 or iy >= h or ix >= w do
                  acc
                else
                  cin = gi * cg + ci

                  acc +
                    elem(tx, ((ni * c + cin) * h + iy) * w + ix) *
                      elem(tw, ((oi * cg + ci) * kh + ky) * kw + kx)
                end
            end

          s + if(bias, do: Enum.at(bias, oi), else: 0.0)
        end

      {vals, [n, o, oh, ow]}
    end

    test "conv2d with stride, padding, dilation, groups, bias" do
      cases = [
        {[1, 1, 5, 5], [1, 1, 3, 3], [1, 1], [0, 0], [1, 1], 1, false},
        {[2, 3, 7, 6], [4, 3, 3, 2], [2, 1], [1, 2], [1, 1], 1, true},
        {[1, 4, 9, 9], [6, 2, 3, 3], [1, 2], [2, 1], [2, 2], 2, true}
      ]

      for {xs, ws, st, pad, dil, groups, bias?} <- cases do
        x = rand_f32(numel(xs))
        w = rand_f32(numel(ws))
        b = if bias?, do: rand_f32(hd(ws))

        opts = [
          stride: List.to_tuple(st),
          padding: List.to_tuple(pad),
          dilation: List.to_tuple(dil),
          groups: groups
        ]

        opts = if bias?, do: [{:bias, t(b, [hd(ws)])} | opts], else: opts
        out = Kiln.conv2d(t(x, xs), t(w, ws), opts)
        {want, os} = conv_ref(x, xs, w, ws, b, st, pad, dil, groups)
        assert Tuple.to_list(Kiln.shape(out)) == os
        assert_close(flat(out), want, 1.0e-4, 1.0e-4)
      end

      assert_raise Kiln.Error, fn ->
        Kiln.conv2d(t(rand_f32(25), [1, 1, 5, 5]), t(rand_f32(18), [1, 2, 3, 3]))
      end
    end

    test "max_pool2d and avg_pool2d" do
      xs = [2, 3, 7, 8]
      x = rand_f32(numel(xs))
      tx = List.to_tuple(x)

      for {k, s, p} <- [{[2, 2], [2, 2], [0, 0]}, {[3, 2], [2, 3], [1, 1]}] do
        [kh, kw] = k
        [sh, sw] = s
        [ph, pw] = p
        oh = div(7 + 2 * ph - kh, sh) + 1
        ow = div(8 + 2 * pw - kw, sw) + 1

        windows =
          for nc <- 0..5, y <- 0..(oh - 1), xx <- 0..(ow - 1) do
            for ky <- 0..(kh - 1), kx <- 0..(kw - 1), iy = y * sh - ph + ky, ix = xx * sw - pw + kx do
              if iy < 0 or ix < 0 or iy >= 7 or ix >= 8, do: nil, else: elem(tx, (nc * 7 + iy) * 8 + ix)
            end
          end

        mx = Kiln.max_pool2d(t(x, xs), List.to_tuple(k), stride: List.to_tuple(s), padding: List.to_tuple(p))
        assert Kiln.shape(mx) == {2, 3, oh, ow}
        assert_close(flat(mx), Enum.map(windows, fn wv -> wv |> Enum.reject(&is_nil/1) |> Enum.max() end))
        av = Kiln.avg_pool2d(t(x, xs), List.to_tuple(k), stride: List.to_tuple(s), padding: List.to_tuple(p))

        assert_close(
          flat(av),
          Enum.map(windows, fn wv -> (wv |> Enum.reject(&is_nil/1) |> Enum.sum()) / (kh * kw) end)
        )
      end
    end
  end

  describe "movement" do
    test "reshape permute transpose" do
      x = rand_f32(2 * 3 * 5)
      tx = t(x, [2, 3, 5])
      assert Kiln.reshape(tx, {5, :auto}) |> Kiln.shape() == {5, 6}
      assert Kiln.reshape(tx, {-1}) |> flat() == x

      for axes <- [[2, 0, 1], [1, 0, 2], [0, 1, 2]] do
        {want, os} = permute(x, [2, 3, 5], axes)
        out = Kiln.permute(tx, axes)
        assert {Tuple.to_list(Kiln.shape(out)), flat(out)} == {os, want}
      end

      {want, _} = permute(x, [2, 3, 5], [0, 2, 1])
      assert Kiln.transpose(tx) |> flat() == want
      {want, _} = permute(x, [2, 3, 5], [2, 1, 0])
      assert Kiln.transpose(tx, 0, -1) |> flat() == want
      assert_raise Kiln.Error, fn -> Kiln.permute(tx, [0, 0, 1]) end
    end

    test "concat slice index_select gather" do
      a = rand_f32(6)
      b = rand_f32(9)
      out = Kiln.concat([t(a, [2, 3]), t(b, [3, 3])], axis: 0)
      assert {Kiln.shape(out), flat(out)} == {{5, 3}, a ++ b}
      out = Kiln.concatenate([t(a, [3, 2]), t(b, [3, 3])], axis: 1)
      want = Enum.zip_with(Enum.chunk_every(a, 2), Enum.chunk_every(b, 3), &(&1 ++ &2)) |> List.flatten()
      assert flat(out) == want

      assert_raise Kiln.Error, ~r/shape_mismatch/, fn ->
        Kiln.concat([t(a, [2, 3]), t(b, [3, 3])], axis: 1)
      end

      x = Enum.to_list(0..29)
      tx = t(x, [3, 10], {:s, 32})

      assert Kiln.slice(tx, 1, 2, 9, 3) |> Kiln.to_list() ==
               for(r <- 0..2, do: for(c <- [2, 5, 8], do: r * 10 + c))

      assert Kiln.slice(tx, 1, -3, 100) |> Kiln.to_list() ==
               for(r <- 0..2, do: for(c <- 7..9, do: r * 10 + c))

      assert Kiln.slice(tx, 0, 5, 9) |> Kiln.shape() == {0, 10}

      idx = [9, 0, 3, 3]
      out = Kiln.index_select(tx, 1, t(idx, [4], {:s, 32}))
      assert Kiln.to_list(out) == for(r <- 0..2, do: for(c <- idx, do: r * 10 + c))

      g = rand_ints(3 * 4, 0, 9)
      out = Kiln.gather(tx, 1, t(g, [3, 4], {:u, 32}))
      assert flat(out) == for({gi, i} <- Enum.with_index(g), do: div(i, 4) * 10 + gi)

      # Negative indices count from the end (numpy take / take_along_axis; issue 28: gather read
      # -1 as 0); -11 and 10 are outside [-10, 10) and read 0.
      neg = [-1, -10, -11, 10]
      want = for(r <- 0..2, do: for(c <- [9, 0], do: r * 10 + c) ++ [0, 0])
      assert Kiln.to_list(Kiln.index_select(tx, 1, t(neg, [4], {:s, 32}))) == want
      gi = List.flatten(List.duplicate(neg, 3))
      assert Kiln.to_list(Kiln.gather(tx, 1, t(gi, [3, 4], {:s, 32}))) == want
    end
  end

  describe "nn" do
    test "embedding" do
      w = rand_f32(10 * 4)
      ids = [[3, 0], [9, 3], [1, 1]]
      out = Kiln.embedding(t(w, [10, 4]), Kiln.tensor(ids, type: {:s, 32}))
      assert Kiln.shape(out) == {3, 2, 4}
      rows = Enum.chunk_every(w, 4)
      assert flat(out) == ids |> List.flatten() |> Enum.flat_map(&Enum.at(rows, &1))
    end

    test "quantized weights (q4_0, q4_1, q8_0)" do
      {n, k} = {3, 32}
      w = rand_f32(n * k)

      for fmt <- [:q4_0, :q4_1, :q8_0] do
        q = Kiln.quantize(t(w, [n, k]), fmt)
        assert Kiln.type(q) == {:u, 32}
        deq = Kiln.dequantize(q, fmt, n, k)
        assert Kiln.shape(deq) == {n, k}
        nbytes = n * %{q4_0: 18, q4_1: 20, q8_0: 34}[fmt]
        <<raw::binary-size(nbytes), _::binary>> = Kiln.to_binary(q)
        assert Kiln.to_binary(Kiln.quant_from_bytes(raw, fmt, n, k)) == Kiln.to_binary(q)
        rows = deq |> flat() |> Enum.chunk_every(k)
        x = t(List.duplicate(1.0, k), [1, k])
        y = Kiln.quant_matmul(x, q, fmt, n)
        assert Kiln.shape(y) == {1, n}

        Enum.zip(flat(y), Enum.map(rows, &Enum.sum/1))
        |> Enum.each(fn {g, e} -> assert abs(g - e) < 1.0e-4 end)

        e = Kiln.quant_embedding(q, fmt, k, Kiln.tensor([2, -1], type: {:s, 32}))
        assert flat(e) == Enum.at(rows, 2) ++ List.duplicate(0.0, k)
      end

      assert_raise Kiln.Error, ~r/format must be one of/, fn -> Kiln.quantize(t(w, [n, k]), :q8_k) end
    end

    test "rope (rotate-half)" do
      {l, d} = {5, 8}
      x = rand_f32(2 * l * d)

      for off <- [0, 3] do
        want =
          x
          |> Enum.chunk_every(d)
          |> Enum.with_index()
          |> Enum.flat_map(fn {row, r} ->
            pos = off + rem(r, l)
            h = div(d, 2)

            for j <- 0..(d - 1) do
              i = rem(j, h)
              ang = pos * :math.pow(10_000.0, -2 * i / d)
              {x1, x2} = {Enum.at(row, i), Enum.at(row, i + h)}

              if j < h,
                do: x1 * :math.cos(ang) - x2 * :math.sin(ang),
                else: x2 * :math.cos(ang) + x1 * :math.sin(ang)
            end
          end)

        assert_close(Kiln.rope(t(x, [2, l, d]), pos_offset: off) |> flat(), want, 1.0e-4, 1.0e-4)
      end
    end

    test "attention, plain and causal, with a scale" do
      {b, lq, lk, d, dv} = {2, 3, 5, 4, 6}
      q = rand_f32(b * lq * d)
      k = rand_f32(b * lk * d)
      v = rand_f32(b * lk * dv)

      for causal <- [false, true], scale <- [nil, 0.3] do
        sc = scale || 1 / :math.sqrt(d)

        want =
          for bi <- 0..(b - 1) do
            qs = Enum.slice(q, bi * lq * d, lq * d)
            ks = Enum.slice(k, bi * lk * d, lk * d)
            vs = Enum.slice(v, bi * lk * dv, lk * dv)
            {kt, _} = permute(ks, [lk, d], [1, 0])

            scores =
              matmul2(qs, [lq, d], kt, [d, lk])
              |> Enum.map(&(&1 * sc))
              |> Enum.chunk_every(lk)
              |> Enum.with_index()
              |> Enum.map(fn {row, i} ->
                row =
                  if causal,
                    do: Enum.with_index(row) |> Enum.map(fn {s, j} -> if j > i, do: -1.0e30, else: s end),
                    else: row

                softmax(row)
              end)
              |> List.flatten()

            matmul2(scores, [lq, lk], vs, [lk, dv])
          end
          |> List.flatten()

        out =
          Kiln.attention(t(q, [b, lq, d]), t(k, [b, lk, d]), t(v, [b, lk, dv]), causal: causal, scale: scale)

        assert Kiln.shape(out) == {b, lq, dv}
        assert_close(flat(out), want, 1.0e-4, 1.0e-4)
      end
    end
  end

  describe "pipes" do
    test "a small MLP pipeline" do
      x = rand_f32(4 * 8)
      w = rand_f32(8 * 3)

      out =
        t(x, [4, 8])
        |> Kiln.matmul(t(w, [8, 3]))
        |> Kiln.relu()
        |> Kiln.softmax(axis: -1)
        |> Kiln.sum(axes: [1])

      assert_close(flat(out), [1.0, 1.0, 1.0, 1.0])
    end
  end
end
