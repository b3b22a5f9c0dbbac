#!/usr/bin/env bash
# Builds the images the container tests run on a machine that cannot pull the Rust or
# Python images: the trawl image's own base stage with binaries built on the host
# (`--target prebuilt`; `prebuilt-indexer` adds the model, `prebuilt-renderer` Chromium),
# and NATS and Redis from
# Debian's packages. Needs the engine and base image of scripts/docker.sh.
#
#   deploy/tests/build_images.sh BIN_DIR MODEL_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
bin_dir="$1"
model_dir="$2"
pre=deploy/docker/prebuilt
for b in trawl trawl-frontier trawl-fetcher trawl-extractor trawl-indexer trawl-notifier trawl-renderer \
         trawl-refiner trawl-ingester; do
  install -m 0755 "$bin_dir/$b" "$pre/bin/$b"
  # The test build's debug info out: the image carries code only, as a release build does.
  strip "$pre/bin/$b"
done
rm -rf "$pre/models/all-MiniLM-L6-v2"
cp -r "$model_dir" "$pre/models/all-MiniLM-L6-v2"
# Host networking: the engine runs without a bridge, and apt reaches the Debian mirror.
build() { docker build -q --network host "$@" >/dev/null; }
build -f deploy/docker/Dockerfile --target prebuilt -t trawl:latest .
build -f deploy/docker/Dockerfile --target prebuilt-indexer -t trawl:indexer .
# Chromium from Debian's packages inside (the renderer).
build -f deploy/docker/Dockerfile --target prebuilt-renderer -t trawl:renderer .
build -f deploy/docker/test/Dockerfile.nats -t trawl-test/nats deploy/docker/test
build -f deploy/docker/test/Dockerfile.redis -t trawl-test/redis deploy/docker/test
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^(trawl|trawl-test/)' >&2
