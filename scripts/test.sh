#!/usr/bin/env bash
# The test suite, as CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec go test ./... "$@"
