# nearby_ex: the Elixir twin of examples/erlang_app, depending on terrain without hex.
#
# terrain's applications are path dependencies built by rebar3 (`manager: :rebar3`).
# Mix never needs hex for them: run mix with MIX_REBAR3 set to Debian's rebar3
# (`MIX_REBAR3=/usr/bin/rebar3 mix test`) so that it does not ask to install its own
# (`mix local.rebar` downloads); `make examples` also sets REBAR_BASE_DIR=_build/rebar3
# so that rebar3 keeps its state here, not in terrain's source tree. From a git tag of
# terrain, the same two lines with
# `git: "https://<where you got terrain>.git", tag: "v0.1.0", sparse: "apps/terrain"`
# instead of `path:`.
defmodule NearbyEx.MixProject do
  use Mix.Project

  def project do
    [
      app: :nearby_ex,
      version: "0.1.0",
      elixir: "~> 1.14",
      deps: deps()
    ]
  end

  # terrain runs on every node of the cluster: it holds the node's attributes and its
  # topology, and answers the other nodes' queries.
  def application do
    [extra_applications: [:logger]]
  end

  defp deps do
    [
      {:terrain_json, path: "../../apps/terrain_json", manager: :rebar3},
      {:terrain, path: "../../apps/terrain", manager: :rebar3}
    ]
  end
end
