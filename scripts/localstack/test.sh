#!/usr/bin/env bash
# npm run test:localstack [-- PART...]: the integration suite, then the example stack deployed with
# cdklocal and checked, against one LocalStack started for the run (with-localstack.sh).
# PART: `suite` (the integration tests), `stack` (cdklocal deploy + test/localstack); default both.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
exec "$repo/scripts/localstack/with-localstack.sh" "$repo/scripts/localstack/parts.sh" "$@"
