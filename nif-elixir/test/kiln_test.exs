defmodule KilnTest do
  use ExUnit.Case, async: true
  import Kiln.Ref

  doctest Kiln
  doctest Kiln.Error
  doctest Kiln.Kernel

  setup_all do
    :rand.seed(:exsss, {7, 11, 13})
    :ok
  end

  test "the NIF is loaded and current" do
    assert Kiln.Native.status() == :ok
    assert Kiln.Native.source_hash() == "kiln-nif-source-hash:" <> Kiln.Native.source_hash_expected()
  end

  test "the error table comes from kiln-core" do
    native = Kiln.Native.error_codes()
    assert Map.new(native) == Kiln.Error.codes()
    assert Enum.map(native, &elem(&1, 1)) == Enum.to_list(0..(length(native) - 1))

    for {atom, status} <- native do
      assert Kiln.Error.status_of(atom) == status
    end
  end

  test "Nx's names, with kiln-core's short names as aliases" do
    a = Kiln.tensor([1.0, -2.5, 3.0])
    b = Kiln.tensor([2.0, 2.0, -1.0])

    for {nx, core} <- [
          subtract: :sub,
          multiply: :mul,
          divide: :div,
          equal: :eq,
          not_equal: :ne,
          less: :lt,
          less_equal: :le,
          greater: :gt,
          greater_equal: :ge
        ] do
      assert Kiln.to_list(apply(Kiln, nx, [a, b])) == Kiln.to_list(apply(Kiln, core, [a, b])), "#{nx}"
    end

    assert Kiln.to_list(Kiln.subtract(a, b)) == [-1.0, -4.5, 4.0]
    assert Kiln.to_list(Kiln.multiply(a, 2)) == [2.0, -5.0, 6.0]
    assert Kiln.to_list(Kiln.greater_equal(a, b)) == [0, 0, 1]
    assert Kiln.to_list(Kiln.negate(a)) == Kiln.to_list(Kiln.neg(a))
    assert Kiln.to_list(a |> Kiln.negate() |> Kiln.floor()) == [-1.0, 2.0, -3.0]
  end

  test "floor keeps the special values and leaves integers as they are" do
    x = Kiln.tensor([-0.5, 0.5, 2.5, -2.5, -0.0, :infinity, :neg_infinity, :nan, -1.0e-40])
    assert [-1.0, +0.0, 2.0, -3.0, -0.0, :infinity, :neg_infinity, :nan, -1.0] == Kiln.to_list(Kiln.floor(x))
    <<_::32, _::32, _::32, _::32, neg_zero::binary-size(4), _::binary>> = Kiln.to_binary(Kiln.floor(x))
    assert neg_zero == <<0, 0, 0, 128>>
    assert Kiln.to_list(Kiln.floor(Kiln.tensor([1, -2], type: {:s, 32}))) == [1, -2]
  end

  test "the Array API's float functions under Nx's and Elixir's names" do
    x = Kiln.tensor([-0.0, 0.5, -2.5, 2.5, :infinity, :nan, 1.0e-10])
    assert [-0.0, 1.0, -2.0, 3.0, :infinity, :nan, 1.0] == Kiln.to_list(Kiln.ceil(x))
    assert [-0.0, 0.0, -2.0, 2.0, :infinity, :nan, 0.0] == Kiln.to_list(Kiln.round(x))
    assert [0.0, 1.0, -1.0, 1.0, 1.0, :nan, 1.0] == Kiln.to_list(Kiln.sign(x))
    [_, _, _, _, _, _, tiny] = Kiln.to_list(Kiln.log1p(x))
    assert_in_delta tiny, 1.0e-10, 1.0e-16
    assert_raise Kiln.Error, ~r/float/, fn -> Kiln.log1p(Kiln.tensor([1, 2], type: {:s, 32})) end
    a = Kiln.tensor([7, -7, 7, -7, 5], type: {:s, 32})
    b = Kiln.tensor([2, 2, -2, -2, 0], type: {:s, 32})

    assert Kiln.to_list(Kiln.mod(a, b)) == [
             Integer.mod(7, 2),
             Integer.mod(-7, 2),
             Integer.mod(7, -2),
             Integer.mod(-7, -2),
             0
           ]

    assert Kiln.to_list(Kiln.floor_div(a, b)) == [3, -4, -4, 3, 0]
    assert Kiln.to_list(Kiln.remainder(a, b)) == Kiln.to_list(Kiln.mod(a, b))
    y = Kiln.tensor([1.0, -1.0, 0.0])
    z = Kiln.tensor([1.0, 1.0, -1.0])
    assert [a1, a2, a3] = Kiln.to_list(Kiln.atan2(y, z))
    assert_in_delta a1, :math.atan2(1.0, 1.0), 1.0e-6
    assert_in_delta a2, :math.atan2(-1.0, 1.0), 1.0e-6
    assert_in_delta a3, :math.pi(), 1.0e-6
    assert Kiln.to_list(Kiln.copysign(z, y)) == [1.0, -1.0, 1.0]
    c = Kiln.tensor([-3.0, 0.5, 9.0, :nan])
    assert [-1.0, 0.5, 2.0, :nan] == Kiln.to_list(Kiln.clip(c, -1.0, 2.0))
    assert [-3.0, 0.5, 2.0, :nan] == Kiln.to_list(Kiln.clip(c, nil, 2))
    assert [:nan, 0.5, 1.0, :nan] == Kiln.to_list(Kiln.clip(c, Kiln.tensor([:nan, 0.0, 0.0, 0.0]), 1.0))
    assert [-3, 0, 4] == Kiln.to_list(Kiln.clip(Kiln.tensor([-7, 0, 9], type: {:s, 32}), -3, 4))
    [h] = Kiln.to_list(Kiln.hypot(Kiln.tensor([3.0e30]), 4.0e30))
    assert_in_delta h, 5.0e30, 1.0e24
  end

  describe "conversion" do
    test "round trips every type through binaries and lists" do
      f = rand_list(37, -100.0, 100.0)
      t = Kiln.tensor(f)
      assert Kiln.shape(t) == {37}
      assert Kiln.type(t) == {:f, 32}

      want =
        for x <- f,
            do:
              (
                <<y::float-32>> = <<x::float-32>>
                y
              )

      assert Kiln.to_list(t) == want

      i = rand_ints(12, -1000, 1000)
      assert Kiln.tensor(i) |> Kiln.reshape({3, 4}) |> Kiln.to_list() == Enum.chunk_every(i, 4)
      u = [0, 1, 4_294_967_295, 123]
      assert Kiln.tensor(u, type: {:u, 32}) |> Kiln.to_list() == u
      assert Kiln.tensor(u, type: :u32) |> Kiln.to_binary() == for(x <- u, into: <<>>, do: <<x::32-little>>)
    end

    test "f16 rounds on the way in and reads back exactly" do
      if Kiln.f16_supported?() do
        t = Kiln.tensor([1.0, 0.5, 65504.0, 1.0e6, -2.25, 0.1], type: {:f, 16})
        assert Kiln.type(t) == {:f, 16}
        assert [1.0, 0.5, 65504.0, :infinity, -2.25, v] = Kiln.to_list(t)
        assert_in_delta v, 0.1, 1.0e-4
        assert byte_size(Kiln.to_binary(t)) == 12
        assert Kiln.from_binary(<<0x3C00::16-little>>, {:f, 16}, {}) |> Kiln.to_list() == 1.0
      end
    end

    test "nested lists, scalars and empty tensors" do
      assert Kiln.tensor(3) |> Kiln.shape() == {}
      assert Kiln.tensor(3) |> Kiln.to_list() == 3
      assert Kiln.tensor([[1.0], [2.0]]) |> Kiln.to_list() == [[1.0], [2.0]]
      e = Kiln.from_binary(<<>>, {:f, 32}, {2, 0})
      assert Kiln.to_list(e) == [[], []]
      assert Kiln.to_binary(e) == <<>>
      assert Kiln.tensor([]) |> Kiln.shape() == {0}
    end

    test "non-finite values travel as atoms" do
      t = Kiln.tensor([:nan, :infinity, :neg_infinity, 1.0])
      assert Kiln.to_list(t) == [:nan, :infinity, :neg_infinity, 1.0]
      assert Kiln.tensor([1.0, 0.0]) |> Kiln.div(0.0) |> Kiln.to_list() == [:infinity, :nan]
    end

    test "inspect shows type, shape and the leading values" do
      assert inspect(Kiln.tensor([[1.5, 2.0], [3.0, 4.0]])) == "#Kiln.Tensor<f32[2][2] [1.5, 2.0, 3.0, 4.0]>"
      assert inspect(Kiln.tensor(0.1)) == "#Kiln.Tensor<f32 [0.1]>"
      big = Kiln.arange(0, 100)
      assert inspect(big) == "#Kiln.Tensor<s32[100] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]>"
      Kiln.free(big)
      assert inspect(big) == "#Kiln.Tensor<s32[100] (freed)>"
    end
  end

  describe "errors" do
    test "bad input raises Kiln.Error and never crashes the VM" do
      e = assert_raise Kiln.Error, fn -> Kiln.from_binary(<<1, 2, 3, 4, 5>>, {:f, 32}, {2}) end
      assert {e.code, e.status} == {:invalid_argument, 1}
      assert e.message =~ "5 bytes"

      e = assert_raise Kiln.Error, fn -> Kiln.tensor([1, 2], type: {:f, 64}) end
      assert e.code == :invalid_argument and e.message =~ "unknown type"

      e = assert_raise Kiln.Error, fn -> Kiln.from_binary(<<0::32>>, :bf16, {1}) end
      assert e.code == :invalid_argument

      e = assert_raise Kiln.Error, fn -> Kiln.tensor([[1, 2], [3]]) end
      assert e.code == :shape_mismatch

      e = assert_raise Kiln.Error, fn -> Kiln.add(Kiln.tensor([1.0, 2.0]), Kiln.tensor([1.0, 2.0, 3.0])) end
      assert {e.code, e.status} == {:shape_mismatch, 3}

      e = assert_raise Kiln.Error, fn -> Kiln.add(Kiln.tensor([1.0]), Kiln.tensor([1])) end
      assert {e.code, e.status} == {:dtype_mismatch, 4}

      e = assert_raise Kiln.Error, fn -> Kiln.exp(Kiln.tensor([1])) end
      assert e.code == :dtype_mismatch

      e = assert_raise Kiln.Error, fn -> Kiln.tensor([1_099_511_627_776]) end
      assert e.code == :invalid_argument

      e = assert_raise Kiln.Error, fn -> Kiln.add(Kiln.tensor([1.0]), "x") end
      assert e.code == :invalid_argument

      e = assert_raise Kiln.Error, fn -> Kiln.sum(Kiln.tensor([1.0]), bogus: 1) end
      assert e.code == :invalid_argument

      e = assert_raise Kiln.Error, fn -> Kiln.reshape(Kiln.tensor([1.0, 2.0, 3.0]), {2, 2}) end
      assert e.code == :shape_mismatch

      e = assert_raise Kiln.Error, fn -> Kiln.from_binary(<<>>, {:f, 32}, {1, 1, 1, 1, 1, 1, 1, 1, 1}) end
      assert e.code in [:invalid_argument, :shape_mismatch]
    end

    test "invalid WGSL gives {:error, %Kiln.Error{code: :shader}} with a location" do
      assert {:error, %Kiln.Error{code: :shader, status: 7, message: msg}} =
               Kiln.Kernel.compile("@compute @workgroup_size(1) fn main() { let x: f32 = ; }", "main")

      assert msg =~ ~r/\d+:\d+/

      assert {:error, %Kiln.Error{code: :shader}} =
               Kiln.Kernel.compile("@compute @workgroup_size(1) fn main() {}", "nope")

      assert_raise Kiln.Error, ~r/shader/, fn -> Kiln.Kernel.compile!("garbage", "main") end
    end

    test "dispatch checks the bindings" do
      k = Kiln.Kernel.compile!(double_src(), "main")
      x = Kiln.tensor([1.0, 2.0])
      e = assert_raise Kiln.Error, fn -> Kiln.Kernel.dispatch(k, [x], {1, 1, 1}) end
      assert e.code == :invalid_argument
      e = assert_raise Kiln.Error, fn -> Kiln.Kernel.dispatch(k, [x, Kiln.tensor([1, 2])], {1, 1, 1}) end
      assert e.code == :dtype_mismatch
      e = assert_raise Kiln.Error, fn -> Kiln.Kernel.dispatch(k, [x, x], {1, 1, 1}) end
      assert e.code == :invalid_argument
    end
  end

  describe "kernels" do
    test "custom kernel with uniforms, several dispatches" do
      src = """
      struct P { scale: f32, n: u32 }
      @group(0) @binding(0) var<storage, read_write> y: array<f32>;
      @group(0) @binding(1) var<uniform> p: P;
      @compute @workgroup_size(64)
      fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        if (id.x < p.n) { y[id.x] = y[id.x] * p.scale + f32(id.x); }
      }
      """

      k = Kiln.Kernel.compile!(src, "main")
      assert k.workgroup_size == {64, 1, 1}
      n = 131
      y = Kiln.zeros({n})
      u = <<2.0::float-32-little, n::32-little>>
      :ok = Kiln.Kernel.dispatch(k, [y], {3, 1, 1}, u)
      :ok = Kiln.Kernel.dispatch(k, [y], 3, u)
      assert Kiln.to_list(y) == for(i <- 0..(n - 1), do: 3.0 * i)
      e = assert_raise Kiln.Error, fn -> Kiln.Kernel.dispatch(k, [y], {1, 1, 1}) end
      assert e.code == :invalid_argument
    end

    test "devices" do
      assert {:ok, [_ | _] = list} = Kiln.devices()
      assert Enum.count(list, & &1.chosen) == 1
      assert %{name: name, backend: _} = hd(list)
      assert is_binary(name)
      assert Kiln.devices!() == list
    end
  end

  def double_src do
    """
    @group(0) @binding(0) var<storage, read> x: array<f32>;
    @group(0) @binding(1) var<storage, read_write> y: array<f32>;
    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
      if (id.x < arrayLength(&x)) { y[id.x] = 2.0 * x[id.x]; }
    }
    """
  end
end

defmodule KilnMemoryTest do
  # Not async: it reads the device's memory counters.
  use ExUnit.Case, async: false

  describe "memory" do
    test "free/1 releases at once and later use is a clear error" do
      Kiln.synchronize()
      t = Kiln.zeros({1024, 64})
      Kiln.synchronize()
      before = Kiln.memory_stats().in_use_bytes
      assert :ok = Kiln.free(t)
      assert Kiln.memory_stats().in_use_bytes <= before - 1024 * 64 * 4
      e = assert_raise Kiln.Error, fn -> Kiln.add(t, 1.0) end
      assert e.code == :invalid_argument and e.message =~ "freed"
      assert_raise Kiln.Error, ~r/freed/, fn -> Kiln.to_binary(t) end
      # Freeing twice is harmless.
      assert :ok = Kiln.free(t)
    end

    test "garbage collection frees the GPU memory" do
      Kiln.synchronize()
      before = Kiln.memory_stats().in_use_bytes

      task =
        Task.async(fn ->
          for _ <- 1..20, do: Kiln.zeros({256, 256})
          :done
        end)

      assert Task.await(task) == :done
      :erlang.garbage_collect()
      Process.sleep(50)
      assert Kiln.memory_stats().in_use_bytes <= before + 256 * 256 * 4
    end
  end

  describe "searching, sorting and sets" do
    test "sort and argsort are stable, NaN last, with Nx's direction:" do
      t = Kiln.tensor([3.0, :nan, -0.0, 1.0, 0.0, 3.0])
      assert Kiln.to_list(Kiln.sort(t)) == [-0.0, 0.0, 1.0, 3.0, 3.0, :nan]
      assert Kiln.to_list(Kiln.argsort(t)) == [2, 4, 3, 0, 5, 1]
      assert Kiln.to_list(Kiln.argsort(t, direction: :desc)) == [1, 0, 5, 3, 2, 4]
      m = Kiln.tensor([[5, 1, 5], [2, 2, 0]], type: {:s, 32})
      assert Kiln.to_list(Kiln.sort(m)) == [[2, 1, 0], [5, 2, 5]]
      assert Kiln.to_list(Kiln.sort(m, axis: 1, direction: :desc)) == [[5, 5, 1], [2, 2, 0]]
      assert_raise Kiln.Error, fn -> Kiln.sort(m, direction: :up) end
      assert_raise Kiln.Error, fn -> Kiln.sort(m, axis: 2) end
    end

    test "searchsorted, count_nonzero, nonzero, unique, isin" do
      s = Kiln.tensor([1.0, 2.0, 2.0, 4.0])
      v = Kiln.tensor([0.0, 2.0, 5.0])
      assert Kiln.to_list(Kiln.searchsorted(s, v)) == [0, 1, 4]
      assert Kiln.to_list(Kiln.searchsorted(s, v, side: :right)) == [0, 3, 4]
      m = Kiln.tensor([[0, 3, 0], [1, 0, 2]], type: {:s, 32})
      assert Kiln.to_list(Kiln.count_nonzero(m)) == 3
      assert Kiln.to_list(Kiln.count_nonzero(m, axes: [1])) == [1, 2]
      {r, c} = Kiln.nonzero(m)
      assert {Kiln.to_list(r), Kiln.to_list(c)} == {[0, 1, 1], [1, 0, 2]}
      u = Kiln.unique_all(Kiln.tensor([3, 1, 3, 2], type: {:s, 32}))
      assert Kiln.to_list(u.values) == [1, 2, 3]
      assert Kiln.to_list(u.indices) == [1, 3, 0]
      assert Kiln.to_list(u.inverse_indices) == [2, 0, 2, 1]
      assert Kiln.to_list(u.counts) == [1, 1, 2]
      assert Kiln.to_list(Kiln.isin(Kiln.tensor([1.0, :nan, 2.0]), Kiln.tensor([2.0, :nan]))) == [0, 0, 1]
      assert_raise Kiln.Error, fn -> Kiln.searchsorted(m, v) end
    end
  end
end
