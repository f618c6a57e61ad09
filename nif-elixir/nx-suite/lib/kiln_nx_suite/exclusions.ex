defmodule KilnNxSuite.Exclusions do
  @moduledoc false
  # The exclusion list (nif-elixir/nx-suite/exclusions.exs): entries {filter, kind, reason}.
  # `filter` is an ExUnit filter ({tag, value}, {tag, ~r/regex/} or a bare tag; `test:` matches
  # the test's name, `module:` its module, `location:` the lines tests start at); `kind` is :gap
  # (Kiln.Backend cannot do what the test asks) or :device (no device backend can), both counted
  # against the pass rate, or :not_backend (fails on Nx.BinaryBackend too: not counted).

  @path Path.expand("../../exclusions.exs", __DIR__)
  @external_resource @path

  def path, do: @path

  def entries do
    {entries, _} = Code.eval_file(@path)

    for entry <- entries do
      case entry do
        {_filter, kind, reason} when kind in [:gap, :device, :not_backend] and is_binary(reason) -> entry
        other -> raise ArgumentError, "#{@path}: bad entry #{inspect(other)}"
      end
    end
  end

  def filters, do: Enum.map(entries(), &elem(&1, 0))

  @doc "The first entry whose filter matches the test's tags, or nil."
  def match(entries, tags), do: Enum.find(entries, fn {filter, _, _} -> matches?(filter, tags) end)

  # ExUnit.Filters' rules for {key, value} and bare keys (strings compared, "Elixir." dropped),
  # and for a location that names the lines tests start at.
  defp matches?(key, tags) when is_atom(key), do: Map.has_key?(tags, key)

  defp matches?({:location, {path, lines}}, tags),
    do: String.ends_with?(tags[:file] || "", path) and tags[:line] in List.wrap(lines)

  defp matches?({key, %Regex{} = re}, tags),
    do: Map.has_key?(tags, key) and to_string(tags[key]) =~ re

  defp matches?({key, value}, tags),
    do: Map.has_key?(tags, key) and strip(to_string(tags[key])) == strip(to_string(value))

  defp strip("Elixir." <> s), do: s
  defp strip(s), do: s
end
