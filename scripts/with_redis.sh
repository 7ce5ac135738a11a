#!/usr/bin/env bash
# Runs a command with a throw-away redis-server: a free loopback port, a temporary directory, no
# persistence, an LRU-bounded memory. The command sees its URL in KVF_REDIS_URL; the server is
# stopped when the command ends, however it ends. Without redis-server installed the command runs
# without KVF_REDIS_URL (the tests that need it then say they were skipped).
#   scripts/with_redis.sh COMMAND [ARGS...]
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  echo "with_redis: redis-server not installed; running without KVF_REDIS_URL" >&2
  exec "$@"
fi
dir="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --maxmemory 256mb --maxmemory-policy allkeys-lru --daemonize no --loglevel warning \
  --logfile "$dir/redis.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 1 100); do  # at most 10 s for it to answer
  if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then break; fi
  sleep 0.1
done
if ! redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
  echo "with_redis: redis-server did not start on port $port" >&2
  cat "$dir/redis.log" >&2 || true
  exit 1
fi
echo "with_redis: redis-server on 127.0.0.1:$port" >&2
export KVF_REDIS_URL="redis://127.0.0.1:$port"
set +e
"$@"
rc=$?
exit $rc
