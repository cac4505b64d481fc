#!/usr/bin/env bash
# Usage: scripts/localstack/with-localstack.sh COMMAND [ARGS...]
# Starts LocalStack on the host (no Docker) on a free loopback port, waits until it is healthy, runs
# COMMAND with AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_S3) pointing at it, and stops it, by process
# id, whatever happens. COMMAND's exit status is the script's; 124 when it ran out of time
# (SLUICE_LOCALSTACK_TIMEOUT, seconds, default 3600).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
home="$repo/.localstack"
log() { echo "localstack: $*" >&2; }

prepared="$("$repo/scripts/localstack/prepare.sh")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
endpoint="http://127.0.0.1:$port"
logfile="$home/localstack-$port.log"

# A filesystem root of its own per run: LocalStack deletes <root>/tmp/localstack when it starts and
# when it stops, and DynamoDB Local's database lives under it, so two runs sharing a root (runs
# overlap on a shared machine) delete each other's tables from under DynamoDB Local, whose writes
# then fail with 500 InternalFailure (docs/localstack.md). Only the installed packages are shared.
run_root="$home/runs/$port"
mkdir -p "$run_root/var/lib/localstack"
ln -sfn "$(sed -n 's/^SLUICE_LOCALSTACK_LIBS=//p' <<< "$prepared")" "$run_root/var/lib/localstack/lib"

# The settings the suite needs (docs/localstack.md says why, one by one).
settings=(
  "FILESYSTEM_ROOT=$run_root"
  "GATEWAY_LISTEN=127.0.0.1:$port"
  "LOCALSTACK_HOST=127.0.0.1:$port"
  "KINESIS_SHARD_LIMIT=10000"
  "KINESIS_ON_DEMAND_STREAM_COUNT_LIMIT=1000"
  "KINESIS_LATENCY=0"
  "KINESIS_PERSISTENCE=0"
  "DYNAMODB_IN_MEMORY=1"
  "DYNAMODB_HEAP_SIZE=512m"
  "DNS_ADDRESS=0"
  "SKIP_SSL_CERT_DOWNLOAD=1"
  "DISABLE_EVENTS=1"
  "LAMBDA_IGNORE_ARCHITECTURE=1"
)
while IFS= read -r line; do
  case "$line" in SLUICE_LOCALSTACK_LIBS=*) ;; *) settings+=("$line") ;; esac
done <<< "$prepared"

started=$(date +%s)
# setsid: LocalStack gets a process group of its own, stopped by the one id. kinesis-mock (node)
# and DynamoDB Local (java) are its children but start in sessions of their own
# (localstack/utils/run.py: start_new_session), so stop() stops them by their ids as well.
env "${settings[@]}" setsid "$home/venv/bin/python" -m localstack.runtime.main > "$logfile" 2>&1 &
pid=$!

descendants() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do echo "$child"; descendants "$child"; done
}

command_pid=""
stop() {
  local status=$?
  if [ -n "$command_pid" ] && kill -0 "$command_pid" 2>/dev/null; then
    kill -TERM -- "-$command_pid" 2>/dev/null || kill -TERM "$command_pid" 2>/dev/null || true
  fi
  local children
  children="$(descendants "$pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  # LocalStack stops its servers on TERM; these are the ones it left (killed, or stuck).
  local child
  for child in $children; do
    if kill -0 "$child" 2>/dev/null; then
      log "stopping its child $child ($(ps -o comm= -p "$child" 2>/dev/null || true)), still running"
      kill -KILL -- "-$child" 2>/dev/null || kill -KILL "$child" 2>/dev/null || true
    fi
  done
  rm -rf "$run_root"
  log "stopped (pid $pid) after $(( $(date +%s) - started )) s; its log: $logfile"
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
# `timeout` bounds the command; on expiry it signals the command's whole process group (vitest's
# workers included) and exits with 124.
timeout --kill-after=30 "${SLUICE_LOCALSTACK_TIMEOUT:-3600}" "$@" &
command_pid=$!
wait "$command_pid"
