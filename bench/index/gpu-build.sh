#!/usr/bin/env bash
# Builds trawl's CUDA embedder benchmark (`embed_bench`, trawl-embed with `--features
# cuda`) on a machine WITHOUT a GPU or CUDA toolkit, and packs what bench/index/gpu.sh
# needs on the GPU machine into DEST (default .gpu/, which git ignores):
#
#   bench/index/gpu-build.sh [CHUNKS.jsonl] [N]
#
# - The CUDA 13.0 toolkit comes from PyPI's nvidia-* wheels (nvcc, cudart, cublas, curand,
#   nvrtc headers and libraries), unpacked into bench/out/cuda; no wheel has the driver's
#   libcuda.so, so a stub with the driver API's names (read from cudarc's bindings) stands
#   in for it at link time. The GPU machine's driver provides the real one.
# - The binary links no LanceDB (trawl-embed), so the build is candle's kernels and the
#   embedder alone, in target/cuda.
# - The model's weights are stored in f16 (45 MB, against 91 MB in f32) to fit the
#   transfer to the GPU machine; each run loads them into the precision it asks for.
# - CHUNKS defaults to bench/out/index/chunks-all.jsonl (made by bench/index/run.sh), of
#   which the first N (10,000) are packed.
set -euo pipefail
cd "$(dirname "$0")/../.."
chunks="${1:-bench/out/index/chunks-all.jsonl}"
n="${2:-10000}"
dest="${DEST:-.gpu}"
tk="$PWD/bench/out/cuda"
cap="${CUDA_COMPUTE_CAP:-90}"

if [ ! -x "$tk/bin/nvcc" ]; then
  mkdir -p "$tk/whl"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux2014_x86_64 --python-version 3.11 -d "$tk/whl" \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 \
    nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
  for w in "$tk"/whl/*.whl; do python3 -m zipfile -e "$w" "$tk/unz"; done
  cp -a "$tk/unz/nvidia/cu13/." "$tk/"
  chmod +x "$tk"/bin/* "$tk"/nvvm/bin/* 2>/dev/null || true
  (cd "$tk/lib" && for f in *.so.*; do b="${f%%.so.*}"; [ -e "$b.so" ] || ln -s "$f" "$b.so"; done)
  ln -sfn lib "$tk/lib64"
  cargo fetch --locked >/dev/null
  bindings="$(ls -d "$HOME"/.cargo/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | tail -1)"
  grep -oE '^\s+fn cu[A-Za-z0-9_]*\(' "$bindings" | sed -E 's/.*fn (cu[A-Za-z0-9_]*)\(/\1/' \
    | sort -u | sed 's/.*/int &(void) { return 999; }/' > "$tk/cuda_stub.c"
  gcc -shared -fPIC -o "$tk/lib/libcuda.so" -Wl,-soname,libcuda.so.1 "$tk/cuda_stub.c"
fi

PATH="$tk/bin:$PATH" CUDA_HOME="$tk" CUDA_PATH="$tk" CUDA_COMPUTE_CAP="$cap" \
  CUDARC_CUDA_VERSION=13000 LIBRARY_PATH="$tk/lib" \
  cargo build --release --locked -p trawl-embed --example embed_bench --features cuda \
  --target-dir target/cuda

mkdir -p "$dest"
strip -o "$dest/embed_bench" target/cuda/release/examples/embed_bench
xz -T0 -6 -f "$dest/embed_bench"
./scripts/fetch-model.sh >/dev/null
model="${TRAWL_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trawl/models/all-MiniLM-L6-v2}"
rm -rf "$dest/model" && cp -r "$model" "$dest/model"
python3 - "$model/model.safetensors" "$dest/model/model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, body = json.loads(raw[8:8 + n]), raw[8 + n:]
out, blobs, off = {}, [], 0
for name, t in header.items():
    if name == "__metadata__":
        out[name] = t
        continue
    a, b = t["data_offsets"]
    data, dtype = body[a:b], t["dtype"]
    if dtype == "F32":
        count = (b - a) // 4
        data, dtype = struct.pack(f"<{count}e", *struct.unpack(f"<{count}f", data)), "F16"
    out[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(out, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for blob in blobs:
        f.write(blob)
PY
tar -cJf "$dest/model.tar.xz" -C "$dest" model && rm -rf "$dest/model"
head -n "$n" "$chunks" > "$dest/chunks.jsonl"
du -sh "$dest"/*
