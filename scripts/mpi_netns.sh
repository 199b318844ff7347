#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a command as 2 MPI ranks in two network namespaces joined by a veth
# pair, so the ranks' traffic crosses a real TCP stack (docs/dist.md's
# "veth" figures). Needs root and iproute2. Rank 0 runs in fcd0 (10.77.0.1),
# rank 1 in fcd1 (10.77.0.2); mpirun "logs in" to each namespace with an
# agent that runs `ip netns exec` instead of ssh, and Open MPI is held to
# its TCP transport on that subnet.
#   scripts/mpi_netns.sh up                  # create the namespaces (idempotent)
#   scripts/mpi_netns.sh run PROGRAM ARGS... # 2 ranks across them
#   scripts/mpi_netns.sh down                # remove them
set -euo pipefail
dir="$(mktemp -d /tmp/fucina-netns.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
case "${1:-}" in
  up)
    ip netns list | grep -q '^fcd0' && exit 0
    ip netns add fcd0
    ip netns add fcd1
    ip link add fcv0 type veth peer name fcv1
    ip link set fcv0 netns fcd0
    ip link set fcv1 netns fcd1
    ip -n fcd0 addr add 10.77.0.1/24 dev fcv0
    ip -n fcd1 addr add 10.77.0.2/24 dev fcv1
    for ns in fcd0 fcd1; do
      ip -n $ns link set lo up
      ip -n $ns link set fcv${ns#fcd} up
    done
    ;;
  down)
    ip netns del fcd0 2>/dev/null || true
    ip netns del fcd1 2>/dev/null || true
    ;;
  run)
    shift
    cat > "$dir/agent.sh" <<'AGENT'
#!/bin/sh
host="$1"; shift
case "$host" in
  10.77.0.1) ns=fcd0 ;;
  10.77.0.2) ns=fcd1 ;;
  *) echo "mpi_netns: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
AGENT
    chmod +x "$dir/agent.sh"
    printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' > "$dir/hosts"
    # the ranks start from the agent, not from this shell: pass what is set
    pass=(-x OMP_NUM_THREADS=1)
    for v in FUCINA_DIST_TIMEOUT_S FUCINA_DDP_STATS FUCINA_DDP_BUCKET_KB FUCINA_DDP_NO_OVERLAP; do
      [ -n "${!v:-}" ] && pass+=(-x "$v")
    done
    ip netns exec fcd0 mpirun --allow-run-as-root -np 2 --hostfile "$dir/hosts" \
      --mca plm_rsh_agent "$dir/agent.sh" --mca oob_tcp_if_include 10.77.0.0/24 \
      --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 "${pass[@]}" "$@"
    ;;
  *)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
