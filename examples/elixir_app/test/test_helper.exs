# This node must be distributed to start peers (a name of its own: runs never collide).
{:ok, _} = :net_kernel.start(:"nearby_ex_#{System.pid()}", %{name_domain: :shortnames})
ExUnit.start()
