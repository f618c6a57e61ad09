//! Elixir NIF (being written).
