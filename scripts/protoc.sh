#!/usr/bin/env bash
# Installs protoc (Debian's protobuf-compiler) when it is missing: lance's build scripts,
# and so every build of the `trawl` command, need it.
set -euo pipefail
command -v protoc >/dev/null && exit 0
echo "installing protobuf-compiler (lance's build needs protoc)"
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
