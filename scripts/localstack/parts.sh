#!/usr/bin/env bash
# Runs inside with-localstack.sh (AWS_ENDPOINT_URL set). Every part runs; the status is the worst.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(suite stack)
status=0
for part in "${parts[@]}"; do
  started=$(date +%s)
  case "$part" in
    suite)
      npx vitest run --project integration || status=1 ;;
    stack)
      # The deploy's result is the test's input: it reports each resource LocalStack did or did not create.
      deploy_log="$repo/.localstack/cdklocal-deploy.log"
      # Bootstrap from a directory without cdk.json: with one, it synthesizes the whole app first (minutes here).
      (cd "$repo/.localstack" && "$repo/node_modules/.bin/cdklocal" bootstrap aws://000000000000/us-east-1) > "$deploy_log" 2>&1 \
        && npx cdklocal deploy SluiceExampleStack -c removalPolicy=destroy --require-approval never --no-notices --no-rollback \
             --outputs-file "$repo/.localstack/stack-outputs.json" >> "$deploy_log" 2>&1
      deploy_status=$?
      echo "localstack: cdklocal deploy exited with $deploy_status (log: $deploy_log)" >&2
      SLUICE_CDKLOCAL_STATUS=$deploy_status SLUICE_CDKLOCAL_LOG="$deploy_log" \
        npx vitest run --config test/localstack/vitest.config.ts || status=1 ;;
    *) echo "unknown part '$part' (suite, stack)" >&2; status=2 ;;
  esac
  echo "localstack: part '$part' took $(( $(date +%s) - started )) s" >&2
done
exit $status
