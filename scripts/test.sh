#!/usr/bin/env bash
# The test command: prepares what the tests need (Python's warcio, to validate the WARC
# files trawl writes; NATS and Redis), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/services.sh

# Python helpers live in a virtual environment inside the checkout (ignored by git).
if [ ! -x .venv/bin/python3 ] || ! .venv/bin/python3 -c "import warcio, pyarrow" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
export PATH="$PWD/.venv/bin:$PATH"
export TRAWL_REQUIRE_PY=1
export TRAWL_REQUIRE_SERVICES=1

cargo test --workspace --locked "$@"
