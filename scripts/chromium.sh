#!/usr/bin/env bash
# Installs Debian's Chromium headless shell when no Chromium is on the machine: the
# renderer (trawl-renderer, `--render auto|always`) drives it over the DevTools protocol,
# and tests/embedded/render.rs renders pages with it. Prints the browser it found.
set -euo pipefail
find_chromium() {
  for c in "${CHROME:-}" chromium-headless-shell chromium chromium-browser google-chrome; do
    [ -n "$c" ] && command -v "$c" 2>/dev/null && return 0
  done
  # Debian's headless shell lives outside PATH.
  for c in /usr/lib/chromium/chromium-headless-shell /usr/lib/chromium/chromium; do
    [ -x "$c" ] && echo "$c" && return 0
  done
  return 1
}
if ! find_chromium >/dev/null; then
  echo "installing chromium-headless-shell (the renderer's browser)" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium-headless-shell >/dev/null
fi
find_chromium
