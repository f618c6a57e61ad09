defmodule KilnNxSuite.Loader do
  @moduledoc false
  # Compiles Nx's test files (and test/support) as they are on disk with one rewrite: every
  # `a == b` and `a != b` outside guards, `defn` bodies and quotes becomes
  # KilnNxSuite.Equal.eq/neq, which compare Nx tensors by value (see KilnNxSuite.Equal; for any
  # other term they are `==` and `!=`). Nothing else in the tests changes: the same assertions,
  # the same values, line numbers kept.

  @doc "Compiles `file` with the rewrite; returns the number of comparisons rewritten."
  def compile_file(file) do
    ast = file |> File.read!() |> Code.string_to_quoted!(file: file)
    {ast, n} = rewrite(ast)
    Code.compile_quoted(ast, file)
    n
  end

  def rewrite(ast), do: walk(ast, 0)

  # Subtrees left alone: guards (no remote calls there), defn code (its `==` is
  # Nx.Defn.Kernel's, elementwise) and quoted code (tests inspect it).
  @skip [:when, :defn, :defnp, :quote, :defguard, :defguardp]

  defp walk({op, _, _} = node, n) when op in @skip, do: {node, n}

  defp walk({op, meta, [a, b]}, n) when op in [:==, :!=] do
    {a, n} = walk(a, n)
    {b, n} = walk(b, n)
    fun = if op == :==, do: :eq, else: :neq
    {{{:., meta, [KilnNxSuite.Equal, fun]}, meta, [a, b]}, n + 1}
  end

  defp walk({f, meta, args}, n) when is_list(args) do
    {f, n} = walk(f, n)
    {args, n} = walk(args, n)
    {{f, meta, args}, n}
  end

  defp walk({a, b}, n) do
    {a, n} = walk(a, n)
    {b, n} = walk(b, n)
    {{a, b}, n}
  end

  defp walk(list, n) when is_list(list), do: Enum.map_reduce(list, n, &walk/2)
  defp walk(other, n), do: {other, n}
end
