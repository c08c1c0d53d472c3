#!/usr/bin/env bash
# A local Redis Cluster for trying remote tables by hand (README "Tables in a
# Redis Cluster") and for the benchmark: 3 masters + 3 replicas of Debian's
# redis-server on loopback ports picked free, joined by
# `redis-cli --cluster create`. The tests start the same cluster themselves
# (src/common/local_redis_cluster.h).
#
#   scripts/redis_cluster.sh start DIR   start it; prints the seed list and writes DIR/seeds
#   scripts/redis_cluster.sh stop DIR    stop every node started in DIR
#
# Environment: REDIS_CLUSTER_MASTERS (3), REDIS_CLUSTER_REPLICAS (1 per
# master), REDIS_CLUSTER_NODE_TIMEOUT_MS (1000: how soon a dead master's
# replica takes over), REDIS_CLUSTER_PASSWORD (requirepass on every node;
# clients then give ENGRAM_REDIS_PASSWORD).
set -euo pipefail
usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2

stop() {
  local stopped=0
  shopt -s nullglob
  for pidfile in "$dir"/node-*/redis.pid; do
    local pid
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
      stopped=$((stopped + 1))
    fi
    rm -f "$pidfile"
  done
  echo "redis_cluster: stopped $stopped node(s) in $dir" >&2
}

case $cmd in
  stop) stop; exit 0 ;;
  start) ;;
  *) usage ;;
esac

for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "redis_cluster: $tool not found: install redis-server and redis-tools (scripts/install-deps.sh)" >&2; exit 1; }
done
masters=${REDIS_CLUSTER_MASTERS:-3}
replicas=${REDIS_CLUSTER_REPLICAS:-1}
nodes=$((masters * (1 + replicas)))
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if compgen -G "$dir/node-*/redis.pid" >/dev/null; then
  echo "redis_cluster: $dir already has a cluster (stop it first: $0 stop $dir)" >&2
  exit 1
fi
# Client ports and cluster bus ports (the default bus port, port + 10000,
# may be taken or past 65535): all bound at once, so distinct, then released.
mapfile -t ports < <(/usr/bin/python3 - "$((nodes * 2))" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
)
auth=()
if [[ -n ${REDIS_CLUSTER_PASSWORD:-} ]]; then auth=(-a "$REDIS_CLUSTER_PASSWORD" --no-auth-warning); fi
addresses=()
trap 'stop' ERR
for ((i = 0; i < nodes; i++)); do
  port=${ports[$i]}
  node_dir=$dir/node-$port
  mkdir -p "$node_dir"
  {
    echo "port $port"
    echo "cluster-port ${ports[$((nodes + i))]}"
    echo "bind 127.0.0.1"
    echo "dir $node_dir"
    echo "cluster-enabled yes"
    echo "cluster-config-file nodes.conf"
    echo "cluster-node-timeout ${REDIS_CLUSTER_NODE_TIMEOUT_MS:-1000}"
    # Masters that live keep serving their slots while another fails over.
    echo "cluster-require-full-coverage no"
    echo 'save ""'
    # Stop at once on SIGTERM, without waiting for replicas to catch up.
    echo "shutdown-timeout 0"
    echo "appendonly no"
    echo "daemonize yes"
    echo "pidfile $node_dir/redis.pid"
    echo "logfile $node_dir/redis.log"
    echo "loglevel warning"
    if [[ -n ${REDIS_CLUSTER_PASSWORD:-} ]]; then
      echo "requirepass $REDIS_CLUSTER_PASSWORD"
      echo "masterauth $REDIS_CLUSTER_PASSWORD"
    fi
  } >"$node_dir/redis.conf"
  chmod 600 "$node_dir/redis.conf"
  redis-server "$node_dir/redis.conf"
  addresses+=("127.0.0.1:$port")
done
for ((i = 0; i < nodes; i++)); do
  for _ in $(seq 200); do
    redis-cli "${auth[@]}" -p "${ports[$i]}" ping 2>/dev/null | grep -q PONG && break
    sleep 0.05
  done
done
redis-cli "${auth[@]}" --cluster create "${addresses[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 ||
  { cat "$dir/create.log" >&2; stop; exit 1; }
for ((i = 0; i < nodes; i++)); do
  for _ in $(seq 400); do
    redis-cli "${auth[@]}" -p "${ports[$i]}" cluster info 2>/dev/null | grep -q "cluster_state:ok" && break
    sleep 0.05
  done
done
seeds=$(IFS=,; echo "${addresses[*]:0:$masters}")
echo "$seeds" >"$dir/seeds"
echo "redis_cluster: $masters masters + $((masters * replicas)) replicas in $dir; seeds: $seeds" >&2
echo "$seeds"
