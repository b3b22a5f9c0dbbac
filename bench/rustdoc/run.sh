#!/usr/bin/env bash
# Crawl benchmark on the toolchain's documentation site (about 48,000 pages) served on
# loopback by the test site: trawl, 3 runs (median reported), against wget's recursive
# crawl of the same site in the same run. Checks coverage and robots.txt from the server's
# access log. Results: bench/out/rustdoc.json.
#
#   bench/rustdoc/run.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
docs="$(rustc --print sysroot)/share/doc/rust/html"
port="${TRAWL_BENCH_PORT:-18095}"
out=bench/out
mkdir -p "$out"

cargo build --release --locked -p trawl -p trawl-testsite

# The server: nginx (a real web server, as the crawl would meet) when it can be had, else
# trawl's own test site. TRAWL_BENCH_SERVER=testsite forces the latter.
server_kind="${TRAWL_BENCH_SERVER:-nginx}"
if [ "$server_kind" = nginx ] && ! command -v nginx >/dev/null; then
  (apt-get install -y -qq nginx-light >/dev/null 2>&1) || server_kind=testsite
  command -v nginx >/dev/null || server_kind=testsite
fi
ngx="$PWD/$out/nginx"
serve() { # $1: access log, started afresh (nginx appends)
  rm -f "$1"
  if [ "$server_kind" = nginx ]; then
    mkdir -p "$ngx"
    cat > "$ngx/nginx.conf" <<CONF
user $(id -un);
worker_processes 1;
daemon off;
pid $ngx/nginx.pid;
error_log $ngx/error.log;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  log_format t '\$msec \$request_time \$status \$request_uri';
  access_log $PWD/$1 t;
  sendfile on; tcp_nodelay on; keepalive_requests 10000000;
  server { listen 127.0.0.1:$port; root $docs; }
}
CONF
    nginx -c "$ngx/nginx.conf" &
  else
    ./target/release/trawl-testsite --dir "$docs" --port "$port" --log "$1" &
  fi
  server=$!
  for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
}
stop() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap 'stop' EXIT

results=()
for i in $(seq 1 "$runs"); do
  serve "$out/access-trawl-$i.jsonl"
  rm -rf "$out/crawl-$i"
  /usr/bin/time -f "%e %P %M" -o "$out/time-trawl-$i.txt" \
    ./target/release/trawl crawl "http://127.0.0.1:$port/" --allow-private --delay 0 \
      --concurrency 64 --out "$out/crawl-$i" --progress none --no-index
  stop
  results+=("$out/crawl-$i")
done

wget_s=""
if command -v wget >/dev/null; then
  serve "$out/access-wget.jsonl"
  rm -rf "$out/wget"
  start=$(date +%s%N)
  # wget honours robots.txt by default; -r -l inf follows every link on the host.
  wget -q -r -l inf -np -P "$out/wget" "http://127.0.0.1:$port/" || true
  wget_s=$(python3 -c "print(($(date +%s%N) - $start) / 1e9)")
  stop
  rm -rf "$out/wget"
fi

python3 bench/rustdoc/analyze.py "$docs" "$out" "$runs" "${wget_s:-}" "$server_kind"
