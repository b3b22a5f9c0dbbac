# Sourced by the benchmarks: serves the toolchain's HTML documentation on loopback with
# `trawl-testsite` from "$bin", logging every request as JSON Lines, until the script exits.
#   serve_docs PORT ACCESS_LOG
serve_docs() {
  local docs
  docs="$(rustc --print sysroot)/share/doc/rust/html"
  [ -f "$docs/index.html" ] || { echo "no documentation at $docs (rustup component add rust-docs)" >&2; exit 1; }
  "$bin/trawl-testsite" --dir "$docs" --port "$1" --log "$2" &
  server=$!
  trap 'kill $server 2>/dev/null' EXIT
  for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && break; sleep 0.1; done
}
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
