# Elixir runner of the Kiln conformance suite: every case of manifest.txt (the line format that
# gen.py writes; see FORMAT.md) through the Elixir binding (Kiln, the Rustler NIF), never
# through another language. Written by hand where the Elixir form is Nx's own; the calls of
# the generated `Kiln` functions are the marked region's. Run inside nif-elixir/ so that the NIF is loaded:
#
#   cd nif-elixir && KILN_NIF_SKIP_CARGO=1 mix run ../tests/conformance/ex_runner.exs MANIFEST.txt OUT.json
#
# Writes {"language": "elixir", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]}.

defmodule Kiln.Conformance do
  @types %{"f32" => {:f, 32}, "f16" => {:f, 16}, "i32" => {:s, 32}, "u32" => {:u, 32}, "bool" => {:u, 8}}

  # ---- manifest.txt

  def parse(path) do
    path
    |> File.read!()
    |> String.split("\n", trim: true)
    |> Enum.reduce(%{ops: [], cases: [], cur: nil}, fn line, acc ->
      case String.split(line, " ", trim: true) do
        ["ops", _n | ops] -> %{acc | ops: ops}
        ["case", id, op] -> %{acc | cur: %{id: id, op: op, params: %{}, inputs: [], out: nil}}
        ["p", key, kind | vals] -> put_in(acc, [:cur, :params, key], param(kind, vals))
        ["in", name, dt, nd | rest] -> update_in(acc, [:cur, :inputs], &(&1 ++ [tensor_spec(name, dt, nd, rest)]))
        ["out", dt, nd | rest] -> put_in(acc, [:cur, :out], out_spec(dt, nd, rest))
        ["end"] -> %{acc | cases: [acc.cur | acc.cases], cur: nil}
        _ -> acc
      end
    end)
    |> then(fn acc -> {acc.ops, Enum.reverse(acc.cases)} end)
  end

  defp param("i", [v]), do: String.to_integer(v)
  defp param("b", [v]), do: v == "1"
  defp param("n", []), do: nil
  defp param("s", [v]), do: v
  defp param("f", [v]), do: num(v)
  defp param("I", [_n | vs]), do: Enum.map(vs, &String.to_integer/1)

  defp num(v) do
    {f, ""} = Float.parse(v)
    f
  end

  defp tensor_spec(name, dt, nd, rest) do
    nd = String.to_integer(nd)
    {dims, [file]} = Enum.split(rest, nd)
    %{name: name, type: Map.fetch!(@types, dt), shape: List.to_tuple(Enum.map(dims, &String.to_integer/1)), file: file}
  end

  defp out_spec(dt, nd, rest) do
    nd = String.to_integer(nd)
    {dims, [file, atol, rtol]} = Enum.split(rest, nd)
    %{type: Map.fetch!(@types, dt), shape: List.to_tuple(Enum.map(dims, &String.to_integer/1)), file: file, atol: num(atol), rtol: num(rtol)}
  end

  # ---- exposure: the binding's own function names

  def exposed?("kernel") do
    fns = Kiln.Kernel.__info__(:functions) |> Keyword.keys()
    :compile in fns and :dispatch in fns
  end

  def exposed?(op), do: String.to_atom(op) in Keyword.keys(Kiln.__info__(:functions))

  # ---- one op through Kiln: the ops whose Kiln function is generated from kiln-core's op table
  # have their clause generated too (`make gen`); the others are Elixir's own idiom, here by hand.

  defp t(p, k), do: Map.fetch!(@types, p[k])
  defp opt_t(p, k), do: if(p[k] == nil, do: nil, else: t(p, k))
  defp pair(l), do: List.to_tuple(l)

  def run(op, p, ins, dir) do
    get = fn name -> Enum.find_value(ins, fn {n, v} -> if n == name, do: v end) end
    x = case ins do
      [{_, v} | _] -> v
      [] -> nil
    end

    case op do
      # BEGIN GENERATED (kiln gen): the ops with a generated Kiln function (their rows' arguments)
      "zeros" -> Kiln.zeros(p["shape"], type: t(p, "dtype"))
      "ones" -> Kiln.ones(p["shape"], type: t(p, "dtype"))
      "full" -> Kiln.full(p["shape"], p["value"], type: t(p, "dtype"))
      "random_uniform" -> Kiln.random_uniform(p["shape"], type: t(p, "dtype"), seed: p["seed"], low: p["low"], high: p["high"])
      "random_normal" -> Kiln.random_normal(p["shape"], type: t(p, "dtype"), seed: p["seed"], mean: p["mean"], std: p["std"])
      "cast" -> Kiln.cast(get.("x"), t(p, "dtype"))
      "matmul" -> Kiln.matmul(get.("a"), get.("b"))
      "sum" -> Kiln.sum(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "mean" -> Kiln.mean(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "max" -> Kiln.max(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "min" -> Kiln.min(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "all" -> Kiln.all(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "any" -> Kiln.any(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "var" -> Kiln.var(get.("x"), axes: p["axes"], keep_axes: p["keepdims"], ddof: p["ddof"])
      "argmax" -> Kiln.argmax(get.("x"), axis: p["axis"], keep_axis: p["keepdims"])
      "argmin" -> Kiln.argmin(get.("x"), axis: p["axis"], keep_axis: p["keepdims"])
      "softmax" -> Kiln.softmax(get.("x"), axis: p["axis"])
      "log_softmax" -> Kiln.log_softmax(get.("x"), axis: p["axis"])
      "layer_norm" -> Kiln.layer_norm(get.("x"), weight: get.("weight"), bias: get.("bias"), eps: p["eps"])
      "rms_norm" -> Kiln.rms_norm(get.("x"), weight: get.("weight"), eps: p["eps"])
      "batch_norm" -> Kiln.batch_norm(get.("x"), get.("mean"), get.("var"), weight: get.("weight"), bias: get.("bias"), eps: p["eps"])
      "conv2d" -> Kiln.conv2d(get.("x"), get.("w"), bias: get.("bias"), stride: pair(p["stride"]), padding: pair(p["padding"]), dilation: pair(p["dilation"]), groups: p["groups"])
      "max_pool2d" -> Kiln.max_pool2d(get.("x"), pair(p["kernel"]), stride: pair(p["stride"]), padding: pair(p["padding"]))
      "avg_pool2d" -> Kiln.avg_pool2d(get.("x"), pair(p["kernel"]), stride: pair(p["stride"]), padding: pair(p["padding"]))
      "concat" -> Kiln.concat(Enum.map(ins, &elem(&1, 1)), axis: p["axis"])
      "index_select" -> Kiln.index_select(get.("x"), p["axis"], get.("indices"))
      "gather" -> Kiln.gather(get.("x"), p["axis"], get.("index"))
      "embedding" -> Kiln.embedding(get.("weight"), get.("ids"))
      "rope" -> Kiln.rope(get.("x"), pos_offset: p["pos_offset"], base: p["base"])
      "attention" -> Kiln.attention(get.("q"), get.("k"), get.("v"), causal: p["causal"], scale: p["scale"])
      "quantize" -> Kiln.quantize(get.("x"), String.to_atom(p["format"]))
      "dequantize" -> Kiln.dequantize(get.("w"), String.to_atom(p["format"]), p["rows"], p["cols"])
      "quant_matmul" -> Kiln.quant_matmul(get.("x"), get.("w"), String.to_atom(p["format"]), p["n"])
      "quant_embedding" -> Kiln.quant_embedding(get.("w"), String.to_atom(p["format"]), p["d"], get.("ids"))
      "topk" -> Kiln.top_k(get.("x"), p["k"], axis: p["axis"], largest: p["largest"]) |> elem(p["output"])
      "count_nonzero" -> Kiln.count_nonzero(get.("x"), axes: p["axes"], keep_axes: p["keepdims"])
      "unique_counts" -> Kiln.unique_counts(get.("x")) |> elem(p["output"])
      "unique_inverse" -> Kiln.unique_inverse(get.("x")) |> elem(p["output"])
      "unique_values" -> Kiln.unique_values(get.("x"))
      "isin" -> Kiln.isin(get.("x1"), get.("x2"), invert: p["invert"])
      "cumulative_sum" -> Kiln.cumulative_sum(get.("x"), axis: p["axis"], type: opt_t(p, "dtype"), include_initial: p["include_initial"])
      "cumulative_prod" -> Kiln.cumulative_product(get.("x"), axis: p["axis"], type: opt_t(p, "dtype"), include_initial: p["include_initial"])
      "prod" -> Kiln.product(get.("x"), axes: p["axes"], keep_axes: p["keepdims"], type: opt_t(p, "dtype"))
      "std" -> Kiln.standard_deviation(get.("x"), axes: p["axes"], keep_axes: p["keepdims"], ddof: p["ddof"])
      "diff" -> Kiln.diff(get.("x"), axis: p["axis"], n: p["n"], prepend: get.("prepend"), append: get.("append"))
      "vecdot" -> Kiln.vecdot(get.("a"), get.("b"), axis: p["axis"])
      # END GENERATED (kiln gen)
      "arange" -> Kiln.arange(p["start"], p["stop"], step: p["step"], type: t(p, "dtype"))
      "where" -> Kiln.where(get.("cond"), get.("a"), get.("b"))
      "clip" -> if Map.has_key?(p, "min"), do: Kiln.clip(x, p["min"], p["max"]), else: Kiln.clip(x, get.("min"), get.("max"))
      "tensordot" ->
        if p["n"] >= 0,
          do: Kiln.tensordot(get.("a"), get.("b"), axes: p["n"]),
          else: Kiln.dot(get.("a"), p["axes1"], get.("b"), p["axes2"])
      "reshape" -> Kiln.reshape(x, List.to_tuple(p["shape"]))
      "permute" -> Kiln.permute(x, p["axes"])
      "transpose" -> Kiln.transpose(x, p["axis0"], p["axis1"])
      "slice" -> Kiln.slice(x, p["axis"], p["start"], p["stop"], p["step"])
      "quant_from_bytes" ->
        data = binary_part(Kiln.to_binary(x), 0, p["nbytes"])
        Kiln.quant_from_bytes(data, String.to_atom(p["format"]), p["rows"], p["cols"])
      o when o in ["sort", "argsort"] ->
        apply(Kiln, String.to_atom(o), [x, [axis: p["axis"], direction: if(p["descending"], do: :desc, else: :asc)]])
      "searchsorted" -> Kiln.searchsorted(get.("x1"), get.("x2"), side: if(p["right"], do: :right, else: :left))
      "nonzero" -> x |> Kiln.nonzero() |> elem(p["output"])
      "unique_all" -> x |> Kiln.unique_all() |> Map.fetch!(Enum.at([:values, :indices, :inverse_indices, :counts], p["output"]))
      "kernel" ->
        k = Kiln.Kernel.compile!(File.read!(Path.join(dir, p["source"])), p["entry"])
        uni = if p["uniforms"] == nil, do: <<>>, else: Base.decode16!(p["uniforms"], case: :lower)
        :ok = Kiln.Kernel.dispatch(k, Enum.map(ins, &elem(&1, 1)), List.to_tuple(p["workgroups"]), uni)
        ins |> Enum.at(p["output"]) |> elem(1)
      o ->
        f = String.to_atom(o)
        cond do
          Map.has_key?(p, "scalar") and p["scalar_first"] -> apply(Kiln, f, [p["scalar"], x])
          Map.has_key?(p, "scalar") -> apply(Kiln, f, [x, p["scalar"]])
          length(ins) == 2 -> apply(Kiln, f, [get.("a"), get.("b")])
          true -> apply(Kiln, f, [x])
        end
    end
  end

  # ---- checking

  defp decode(bin, {:f, 32}), do: for(<<c::binary-size(4) <- bin>>, do: f32(c))
  defp decode(bin, {:f, 16}), do: for(<<c::binary-size(2) <- bin>>, do: f16(c))
  defp decode(bin, {:s, 32}), do: for(<<v::signed-32-little <- bin>>, do: v)
  defp decode(bin, {:u, 32}), do: for(<<v::unsigned-32-little <- bin>>, do: v)
  defp decode(bin, {:u, 8}), do: for(<<v::8 <- bin>>, do: v)

  # NaN and the infinities do not match a float pattern: they become atoms.
  defp f32(<<v::float-32-little>>), do: v
  defp f32(<<bits::unsigned-32-little>>), do: special(Bitwise.band(bits, 0x7FFFFF) != 0, Bitwise.bsr(bits, 31))
  defp f16(<<v::float-16-little>>), do: v
  defp f16(<<bits::unsigned-16-little>>), do: special(Bitwise.band(bits, 0x3FF) != 0, Bitwise.bsr(bits, 15))
  defp special(true, _), do: :nan
  defp special(false, 0), do: :infinity
  defp special(false, 1), do: :neg_infinity

  defp close?(g, w, _atol, _rtol) when is_atom(g) or is_atom(w), do: g == w
  # A zero matches only a zero of the same sign (-0.0 == 0.0 in Erlang, so the bits decide).
  defp close?(g, w, _atol, _rtol) when g == 0 and w == 0, do: sign_bit(g) == sign_bit(w)
  defp close?(g, w, atol, rtol), do: g == w or abs(g - w) <= atol + rtol * abs(w)

  defp sign_bit(v) do
    <<s::1, _::63>> = <<v::float-64>>
    s
  end

  def check(out, dir, y) do
    got = Kiln.to_binary(y)
    digest = :crypto.hash(:sha256, got) |> Base.encode16(case: :lower)

    cond do
      y.type != out.type or y.shape != out.shape ->
        {"fail", digest, "output #{inspect(y.type)} #{inspect(y.shape)}, expected #{inspect(out.type)} #{inspect(out.shape)}"}

      true ->
        want = File.read!(Path.join(dir, out.file))
        g = decode(got, out.type)
        w = decode(want, out.type)

        bad =
          Enum.zip(g, w)
          |> Enum.with_index()
          |> Enum.reject(fn {{a, b}, _} -> close?(a, b, out.atol, out.rtol) end)

        cond do
          byte_size(got) != byte_size(want) -> {"fail", digest, "#{byte_size(got)} output bytes, expected #{byte_size(want)}"}
          bad == [] -> {"pass", digest, ""}
          true ->
            [{{a, b}, i} | _] = bad
            {"fail", digest, "#{length(bad)} of #{length(w)} elements outside atol #{out.atol} rtol #{out.rtol}; first: element #{i}: got #{inspect(a)}, expected #{inspect(b)}"}
        end
    end
  end

  # ---- output

  def json(s) when is_binary(s) do
    esc =
      s
      |> String.to_charlist()
      |> Enum.map(fn
        ?" -> ~S(\")
        ?\\ -> ~S(\\)
        c when c < 0x20 -> :io_lib.format("\\u~4.16.0b", [c]) |> to_string()
        c -> <<c::utf8>>
      end)
      |> Enum.join()

    "\"" <> esc <> "\""
  end

  def main([manifest, out_path]) do
    dir = Path.dirname(Path.expand(manifest))
    {ops, cases} = parse(manifest)
    missing = Enum.reject(ops, &exposed?/1)

    results =
      for c <- cases do
        {status, digest, msg} =
          if c.op in missing do
            {"missing", "", "op #{c.op} is not exposed by the Elixir binding (Kiln.#{c.op})"}
          else
            try do
              ins = for s <- c.inputs, do: {s.name, Kiln.from_binary(File.read!(Path.join(dir, s.file)), s.type, s.shape)}
              y = run(c.op, c.params, ins, dir)
              check(c.out, dir, y)
            rescue
              e -> {"error", "", Exception.message(e)}
            end
          end

        {c.id, c.op, status, digest, msg}
      end

    body =
      results
      |> Enum.map(fn {id, op, st, d, m} ->
        "  {\"id\": #{json(id)}, \"op\": #{json(op)}, \"status\": #{json(st)}, \"sha256\": #{json(d)}, \"message\": #{json(m)}}"
      end)
      |> Enum.join(",\n")

    File.write!(out_path, "{\"language\": \"elixir\", \"binding\": \"Kiln (NIF)\", \"missing_ops\": [" <>
      Enum.map_join(missing, ", ", &json/1) <> "],\n \"cases\": [\n" <> body <> "\n ]}\n")

    npass = Enum.count(results, fn {_, _, st, _, _} -> st == "pass" end)
    IO.puts("conformance (elixir): #{npass}/#{length(results)} cases pass; results in #{out_path}")
  end
end

Kiln.Conformance.main(System.argv())
