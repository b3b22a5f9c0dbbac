#!/usr/bin/env bash
# The CUDA side of the embedding benchmark, run ON a GPU machine: trawl's embedder
# (`embed_bench`, cross-built with `--features cuda` by bench/index/gpu-build.sh) against
# sentence-transformers on the same GPU, the same chunks and the same weights, in the same
# run, alternating, RUNS times per batch size and precision (f32; trawl also TF32,
# sentence-transformers also bf16, as the half-precision figure trawl's candle pass cannot
# reach: see crates/embed/src/embed.rs, gpu_precision). Medians and ratios in
# OUT/gpu.json; every run in OUT/gpu-runs.jsonl.
#
#   bench/index/gpu.sh IN [OUT]
#
# IN holds what gpu-build.sh packed: embed_bench.xz, model.tar.xz (the model directory;
# its weights stored in f16 to fit the transfer, loaded in the precision each run asks
# for), chunks.jsonl. The machine needs PyTorch with its CUDA 13 libraries (which
# embed_bench links too) and sentence-transformers.
set -euo pipefail
cd "$(dirname "$0")/../.."
in="${1:?usage: gpu.sh IN [OUT]}"
out="${2:-bench/out/gpu}"
runs="${RUNS:-3}"
batches="${BATCHES:-32 256}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Python unpacks (lzma, tarfile): the GPU machine's image need not have xz.
python3 - "$in" "$work" <<'PY'
import lzma, shutil, sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
with lzma.open(f"{src}/embed_bench.xz") as f, open(f"{dst}/embed_bench", "wb") as g:
    shutil.copyfileobj(f, g)
with tarfile.open(f"{src}/model.tar.xz") as t:
    t.extractall(dst, filter="data")
PY
chmod +x "$work/embed_bench"
export TRAWL_MODEL_DIR="$work/model"
chunks="$in/chunks.jsonl"

# PyTorch's CUDA libraries (cudart, cublas, curand, nvrtc); libcuda comes from the driver.
cu_lib="$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')"
export LD_LIBRARY_PATH="$cu_lib:${LD_LIBRARY_PATH:-}"
if ldd "$work/embed_bench" | grep 'not found'; then
  echo "gpu.sh: embed_bench misses libraries (above)" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
echo "chunks: $(wc -l < "$chunks")" | tee -a "$out/gpu.txt"

runs_file="$out/gpu-runs.jsonl"
: > "$runs_file"
tag() { sed "s/^{/{\"precision\": \"$1\", /" >> "$runs_file"; tail -1 "$runs_file" >&2; }
# One side's run; a side that fails is logged (OUT/errors.log) and the others go on.
side() {
  local precision="$1" line
  shift
  if line="$("$@" 2>>"$out/errors.log")"; then
    echo "$line" | tag "$precision"
  else
    echo "failed ($precision): $*" | tee -a "$out/errors.log" >&2
  fi
}
for batch in $batches; do
  for i in $(seq 1 "$runs"); do
    # The first run of the first batch size keeps each side's vectors for the agreement.
    v() { [ "$i" = 1 ] && [ "$batch" = "${batches%% *}" ] && echo "$work/$1.f32" || true; }
    side f32 "$work/embed_bench" embed "$chunks" "$batch" auto $(v trawl-f32)
    side tf32 env TRAWL_EMBED_PRECISION=tf32 "$work/embed_bench" embed "$chunks" "$batch" auto $(v trawl-tf32)
    side f32 env BENCH_DEVICE=cuda python3 bench/index/st_embed.py "$chunks" "$batch" $(v st-f32)
    side bf16 env BENCH_DEVICE=cuda BENCH_DTYPE=bf16 python3 bench/index/st_embed.py "$chunks" "$batch" $(v st-bf16)
  done
done

python3 - "$out" "$work" > "$out/gpu.json" <<'PY'
import json, statistics, sys
import numpy as np
out, work = sys.argv[1], sys.argv[2]
runs = [json.loads(l) for l in open(f"{out}/gpu-runs.jsonl")]
# A CUDA build falls back to the CPU when it finds no device: such a run measures nothing.
off = [r for r in runs if r["impl"].startswith("trawl") and not r["device"].startswith("cuda")]
assert not off, f"trawl did not run on the GPU: {off[0]}"
summary = {"gpu": open(f"{out}/gpu.txt").read().strip()}
for r in runs:
    side = "trawl" if r["impl"].startswith("trawl") else "sentence-transformers"
    key = f"{side} {r['precision']} batch {r['batch']}"
    summary.setdefault(key, []).append(r["chunks_per_s"])
med = {k: statistics.median(v) for k, v in summary.items() if isinstance(v, list)}
for k, v in med.items():
    summary[k] = {"chunks_per_s_median": v, "runs": summary[k]}
for k, v in med.items():
    if k.startswith("trawl "):
        peer = med.get("sentence-transformers " + k[len("trawl "):])
        if peer:
            summary["ratio " + k + " / sentence-transformers"] = v / peer
def load(name):
    return np.fromfile(f"{work}/{name}.f32", dtype="<f4").reshape(-1, 384)
def cos(a, b):
    import os
    if not (os.path.exists(f"{work}/{a}.f32") and os.path.exists(f"{work}/{b}.f32")):
        return {"missing": True}
    c = (load(a) * load(b)).sum(1)
    # A NaN vector is a failure to report, not a number to sort past.
    bad = int(np.isnan(c).sum())
    c = np.sort(c[~np.isnan(c)])
    if len(c) == 0:
        return {"nan_vectors": bad}
    return {"nan_vectors": bad, "min": float(c[0]), "p1": float(c[int(0.01 * (len(c) - 1))]), "median": float(np.median(c))}
for a, b in [("trawl-f32", "st-f32"), ("trawl-tf32", "st-f32"), ("st-bf16", "st-f32")]:
    summary[f"cosine {a} vs {b}"] = cos(a, b)
print(json.dumps(summary, indent=1))
PY
cat "$out/gpu.json"
