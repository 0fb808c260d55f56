defmodule NearbyExTest do
  # A cluster of four nodes: this one and three peers, each running terrain with the
  # same topology:
  #
  #   dc ── rack1: this node, A
  #      └─ rack2: B (with a GPU), C
  use ExUnit.Case, async: false

  setup_all do
    {:ok, _} = Application.ensure_all_started(:terrain)
    # the peers get this node's code: terrain's applications, Elixir, and nearby_ex
    code_path = Enum.flat_map(:code.get_path(), fn dir -> [~c"-pa", dir] end)
    cookie = Atom.to_charlist(:erlang.get_cookie())

    peers =
      for _ <- 1..3 do
        # controlled over stdin/stdout, then connected as an ordinary (visible) node
        {:ok, peer, node} =
          :peer.start(%{name: :peer.random_name(:nearby_ex), connection: :standard_io, wait_boot: 60_000,
                        args: [~c"-setcookie", cookie | code_path]})

        true = :net_kernel.connect_node(node)
        {:ok, _} = :erpc.call(node, :application, :ensure_all_started, [:terrain], 10_000)
        {peer, node}
      end

    [a, b, c] = Enum.map(peers, fn {_, node} -> node end)

    topology =
      {:network, :dc,
       [{:network, :rack1, [{:node, node()}, {:node, a}]}, {:network, :rack2, [{:node, b}, {:node, c}]}]}

    for n <- [node(), a, b, c], do: :ok = :erpc.call(n, :terrain, :load_topology, [topology], 10_000)
    :ok = :erpc.call(b, :terrain, :set_attr, [:gpu, true, %{owner: :persistent}], 10_000)

    on_exit(fn -> Enum.each(peers, fn {peer, _} -> :peer.stop(peer) end) end)
    %{a: a, b: b, c: c}
  end

  test "every node is a candidate of no predicates: this one first, then A in its rack, then B and C", ctx do
    [here, a | far] = NearbyEx.candidates([])
    assert {here, a} == {node(), ctx.a}
    assert Enum.sort(far) == Enum.sort([ctx.b, ctx.c])
  end

  test "a function asked to run on a GPU node runs on B, the only one", ctx do
    assert NearbyEx.candidates([{:gpu, true}]) == [ctx.b]
    assert NearbyEx.run([{:gpu, true}], {:erlang, :node, []}) == {:ok, ctx.b, ctx.b}
  end

  test "a function asked to run very near, on another node, runs on A", ctx do
    assert NearbyEx.run([{:level, :eq, :very_near}], {:erlang, :*, [2, 3]}) == {:ok, ctx.a, 6}
  end

  test "when no node is very near and has a GPU, run returns terrain's error" do
    assert NearbyEx.candidates([{:gpu, true}, {:level, :eq, :very_near}]) == []
    assert NearbyEx.run([{:gpu, true}, {:level, :eq, :very_near}], {:erlang, :node, []}) ==
             {:error, {:no_node, :none}}
  end
end
