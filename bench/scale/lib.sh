# Shared by run.sh and index.sh (sourced).
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return; sleep 0.1; done; echo "port $1:$2 did not open" >&2; exit 1; }
# RSS of a process every second, with the bytes of a file it writes: time rss_kb bytes.
sample() {
  local pid=$1 file=$2 log=$3 t=0
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    size=$(stat -c %s "$file" 2>/dev/null || echo 0)
    echo "$t ${rss:-0} $size" >> "$log"
    sleep 1; t=$((t + 1))
  done
}
