#!/usr/bin/env bash
# Two LocalStack runs on one checkout must not disturb each other: run A writes to DynamoDB, run B
# starts and stops, then A writes again. Before each run had its own filesystem root, A's writes
# after B answered 500 InternalFailure (docs/localstack.md, "The DynamoDB 500s"). Exit 0 if A's
# calls all succeed. About two minutes.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/scripts/localstack"
markers="$(mktemp -d)"
"$here/with-localstack.sh" node "$here/overlap-check.mjs" "$markers/written" "$markers/second-done" &
first=$!
trap 'kill -TERM "$first" 2>/dev/null || true; rm -rf "$markers"' EXIT
until [ -e "$markers/written" ]; do
  kill -0 "$first" 2>/dev/null || { wait "$first"; exit 1; }
  sleep 1
done
"$here/with-localstack.sh" true
touch "$markers/second-done"
wait "$first"
