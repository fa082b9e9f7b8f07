#!/usr/bin/env bash
# A two-host Gloo launch on one machine: two network namespaces joined by a veth pair stand in for
# two hosts, two ranks each, MASTER_ADDR the first namespace's address (so the store and Gloo's
# connections cross the "network", and each rank finds the interface that reaches MASTER_ADDR).
# Needs root (CAP_NET_ADMIN) to make namespaces; exits 77 (skipped) where it cannot.
#   two_host_netns.sh COMM_GLOO_TEST [gtest args...]
set -euo pipefail
test_binary=${1:?usage: two_host_netns.sh COMM_GLOO_TEST [args]}
shift
tag=$$
ns0=zh0_$tag ns1=zh1_$tag
subnet=10.$((200 + tag % 50)).$((tag / 50 % 250)).
if ! ip netns add "$ns0" 2>/dev/null; then
  echo "zero: skipped: cannot create network namespaces here (needs root / CAP_NET_ADMIN)"
  exit 77
fi
cleanup() {
  ip netns del "$ns0" 2>/dev/null || true
  ip netns del "$ns1" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns1"
ip link add "ve0_$tag" type veth peer name "ve1_$tag"
ip link set "ve0_$tag" netns "$ns0"
ip link set "ve1_$tag" netns "$ns1"
ip -n "$ns0" addr add "${subnet}1/24" dev "ve0_$tag"
ip -n "$ns1" addr add "${subnet}2/24" dev "ve1_$tag"
for ns in "$ns0" "$ns1"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns0" link set "ve0_$tag" up
ip -n "$ns1" link set "ve1_$tag" up
# The namespaces start empty: any port is free in them.
port=$((20000 + tag % 20000))
pids=()
for rank in 0 1 2 3; do
  ns=$ns0
  [ "$rank" -ge 2 ] && ns=$ns1
  ip netns exec "$ns" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR="${subnet}1" MASTER_PORT=$port ZERO_LOG_ALL_RANKS=1 "$test_binary" "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
[ "$status" = 0 ] && echo "two-host launch: 4 ranks on 2 namespaces passed"
exit "$status"
