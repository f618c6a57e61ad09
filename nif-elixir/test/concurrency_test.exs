defmodule KilnConcurrencyTest do
  # Not async: the scheduler test measures time.
  use ExUnit.Case, async: false
  import Kiln.Ref

  @moduletag timeout: 300_000

  test "200 concurrent processes running mixed ops get correct results" do
    tasks =
      for p <- 1..200 do
        Task.async(fn ->
          :rand.seed(:exsss, {p, p * 7, 99})
          n = 1 + rem(p * 37, 97)
          a = rand_list(n) |> Enum.map(&f32/1)
          b = rand_list(n) |> Enum.map(&f32/1)
          ta = Kiln.tensor(a)
          tb = Kiln.tensor(b)

          case rem(p, 5) do
            0 ->
              assert_close(Kiln.add(ta, tb) |> Kiln.mul(2.0) |> flat(), Enum.zip_with(a, b, &(2 * (&1 + &2))))

            1 ->
              assert_close(
                Kiln.sum(Kiln.mul(ta, tb)) |> flat(),
                [Enum.sum(Enum.zip_with(a, b, &*/2))],
                1.0e-4,
                1.0e-4
              )

            2 ->
              out = Kiln.matmul(Kiln.reshape(ta, {n, 1}), Kiln.reshape(tb, {1, n}))
              assert_close(flat(out), for(x <- a, y <- b, do: x * y))

            3 ->
              assert_close(Kiln.softmax(ta) |> flat(), softmax(a))

            4 ->
              i = Kiln.cast(Kiln.mul(ta, 100.0), {:s, 32})
              assert flat(i) == Enum.map(a, &trunc(f32mul(&1, 100.0)))
              assert Kiln.argmax(ta) |> Kiln.to_number() == Enum.find_index(a, &(&1 == Enum.max(a)))
          end

          if rem(p, 3) == 0, do: Kiln.free(ta)
          p
        end)
      end

    assert Enum.map(tasks, &Task.await(&1, 240_000)) == Enum.to_list(1..200)
  end

  defp f32(x),
    do:
      (
        <<y::float-32>> = <<x::float-32>>
        y
      )

  defp f32mul(x, y),
    do:
      (
        <<z::float-32>> = <<x * y::float-32>>
        z
      )

  # llvmpipe (lavapipe) stops any one invocation's loops after 65535 iterations, so the kernel
  # is made long by its width: `groups` workgroups of 64 invocations, each hashing n times.
  @spin """
  struct P { n: u32 }
  @group(0) @binding(0) var<storage, read_write> y: array<f32>;
  @group(0) @binding(1) var<uniform> p: P;
  @compute @workgroup_size(64)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var h: u32 = 12345u;
    for (var i: u32 = 0u; i < p.n; i = i + 1u) {
      h = h * 1664525u + 1013904223u;
      h = h ^ (h >> 13u);
    }
    y[gid.x] = f32(h >> 8u);
  }
  """

  @iters 60_000

  defp spin(k, groups, n \\ @iters) do
    y = Kiln.zeros({groups * 64})
    :ok = Kiln.Kernel.dispatch(k, [y], {groups, 1, 1}, <<n::32-little>>)
    Kiln.to_list(y)
  end

  test "a long custom kernel does not stall normal schedulers" do
    k = Kiln.Kernel.compile!(@spin, "main")
    # Warm up (pipeline creation), then calibrate the width so that one run takes over a
    # second in all on this device.
    spin(k, 1, 1)

    groups =
      Enum.reduce_while(Stream.iterate(1, &(&1 * 4)), nil, fn g, _ ->
        {us, _} = :timer.tc(fn -> spin(k, g) end)
        if us >= 250_000 or g >= 16_384, do: {:halt, Kernel.min(g * 2, 65_535)}, else: {:cont, nil}
      end)

    parent = self()
    ticker = spawn_link(fn -> tick(parent) end)

    # More long waits than there are normal schedulers: were a wait on a normal scheduler,
    # every one of them would be blocked (idle schedulers steal the queued waits) and the
    # ticker could not run.
    started = System.monotonic_time(:millisecond)
    waits = for _ <- 1..(4 * System.schedulers_online()), do: Task.async(fn -> spin(k, groups) end)
    results = Enum.map(waits, &Task.await(&1, 240_000))
    elapsed = System.monotonic_time(:millisecond) - started

    send(ticker, {:report, self()})
    assert_receive {:ticks, stamps}, 5_000
    during = Enum.filter(stamps, &(&1 > started and &1 < started + elapsed))
    edges = [started] ++ during ++ [started + elapsed]
    max_gap = edges |> Enum.chunk_every(2, 1, :discard) |> Enum.map(fn [a, b] -> b - a end) |> Enum.max()

    # The kernel computed what it should: the same hash in every invocation and run, and a
    # short run matches the hash computed here.
    assert results |> List.flatten() |> Enum.uniq() == [lcg(12345, @iters)]
    assert spin(k, 1, 3000) == List.duplicate(lcg(12345, 3000), 64)

    assert elapsed >= 800, "the kernels were too short (#{elapsed} ms) to show anything"
    # Were the waits on normal schedulers, all of them would be blocked and the ticker would
    # not tick at all until the kernels finished. (lavapipe runs the kernel on the same CPUs,
    # so the OS may still pause the whole VM for a few hundred ms: the bound is loose.)
    assert length(during) >= 5, "the ticker ticked #{length(during)} times in #{elapsed} ms"
    assert max_gap < elapsed * 0.6, "the ticker stalled for #{max_gap} ms of the #{elapsed} ms"
  end

  defp lcg(h, 0), do: Bitwise.bsr(h, 8) / 1

  defp lcg(h, n) do
    h = rem(h * 1_664_525 + 1_013_904_223, 4_294_967_296)
    lcg(Bitwise.bxor(h, Bitwise.bsr(h, 13)), n - 1)
  end

  defp tick(parent, stamps \\ []) do
    receive do
      {:report, to} -> send(to, {:ticks, Enum.reverse(stamps)})
    after
      2 -> tick(parent, [System.monotonic_time(:millisecond) | stamps])
    end
  end
end
