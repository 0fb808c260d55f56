defmodule NearbyEx do
  @moduledoc """
  Runs a function on a node chosen by terrain, preferring nodes near this one, and
  says where it ran.
  """

  @doc "The nodes of the cluster that satisfy `preds`, nearest first."
  @spec candidates([term()]) :: [node()]
  def candidates(preds) do
    :terrain.choose_nodes(:all, preds, %{order_by: :distance})
  end

  @doc """
  Runs `{m, f, a}` on the nearest node that satisfies `preds` and returns
  `{:ok, node, result}`, or terrain's `{:error, reason}`.
  """
  @spec run([term()], {module(), atom(), [term()]}) :: {:ok, node(), term()} | {:error, term()}
  def run(preds, {m, f, a}) do
    parent = self()
    ref = make_ref()
    # a function of this module, so that the chosen node (which has this code) can run it
    task = {__MODULE__, :report, [parent, ref, {m, f, a}]}

    case :terrain.spawn_on(preds, task, %{candidates: candidates(preds), pick: :first, monitor: true}) do
      {:ok, _pid, node, monitor} ->
        receive do
          {^ref, ^node, result} ->
            Process.demonitor(monitor, [:flush])
            {:ok, node, result}

          {:DOWN, ^monitor, :process, _, why} ->
            {:error, {:crashed, node, why}}
        after
          5000 -> {:error, {:timeout, node}}
        end

      {:error, _} = error ->
        error
    end
  end

  @doc false
  def report(parent, ref, {m, f, a}), do: send(parent, {ref, node(), apply(m, f, a)})
end
