#!/usr/bin/env bash
# Usage: scripts/localstack/with-localstack.sh COMMAND [ARGS...]
# Starts LocalStack on the host (no Docker) on a free loopback port, waits until it is healthy, runs
# COMMAND with AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_S3) pointing at it, and stops it, by its
# process group, whatever happens. COMMAND's exit status is the script's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
home="$repo/.localstack"
log() { echo "localstack: $*" >&2; }

prepared="$("$repo/scripts/localstack/prepare.sh")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
endpoint="http://127.0.0.1:$port"
logfile="$home/localstack-$port.log"

# The settings the suite needs (docs/localstack.md says why, one by one).
settings=(
  "GATEWAY_LISTEN=127.0.0.1:$port"
  "LOCALSTACK_HOST=127.0.0.1:$port"
  "KINESIS_SHARD_LIMIT=10000"
  "KINESIS_ON_DEMAND_STREAM_COUNT_LIMIT=1000"
  "KINESIS_LATENCY=0"
  "KINESIS_PERSISTENCE=0"
  "DYNAMODB_HEAP_SIZE=1g"
  "DNS_ADDRESS=0"
  "SKIP_SSL_CERT_DOWNLOAD=1"
  "DISABLE_EVENTS=1"
  "LAMBDA_IGNORE_ARCHITECTURE=1"
)
while IFS= read -r line; do settings+=("$line"); done <<< "$prepared"

started=$(date +%s)
# setsid: LocalStack starts kinesis-mock (node) and DynamoDB Local (java) as children; its own
# process group lets the trap stop all of them by the one id.
env "${settings[@]}" setsid "$home/venv/bin/python" -m localstack.runtime.main > "$logfile" 2>&1 &
pid=$!

command_pid=""
stop() {
  local status=$?
  if [ -n "$command_pid" ] && kill -0 "$command_pid" 2>/dev/null; then kill -TERM "$command_pid" 2>/dev/null || true; fi
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  log "stopped (pid $pid); its log: $logfile"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "starting $(cat "$repo/scripts/localstack/VERSION") on $endpoint (pid $pid)"
until curl -sf "$endpoint/_localstack/health" > /dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then log "exited before it was healthy:"; tail -40 "$logfile" >&2; exit 1; fi
  if [ $(( $(date +%s) - started )) -gt 180 ]; then log "not healthy after 180 s:"; tail -40 "$logfile" >&2; exit 1; fi
  sleep 0.5
done
log "healthy after $(( $(date +%s) - started )) s"

export AWS_ENDPOINT_URL="$endpoint" AWS_ENDPOINT_URL_S3="$endpoint"
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
# In the background and waited for: bash runs a trap only once the foreground command returns,
# while `wait` returns at once on a signal, so TERM stops LocalStack (and the command) right away.
"$@" &
command_pid=$!
wait "$command_pid"
