"""sentence-transformers' side of the embedding benchmark: the same chunks, the same model
files (TRAWL_MODEL_DIR or the fetch script's cache), batch 32 unless told, float32. Prints
one JSON object like `embed_bench embed`.

    st_embed.py CHUNKS.jsonl [BATCH] [VECTORS]

BENCH_DEVICE=cuda runs it on the GPU (`bench/index/gpu.sh`), BENCH_DTYPE=f16 or bf16 in
half precision there; VECTORS receives the vectors as little-endian f32 rows."""

import json
import os
import pathlib
import sys
import time

import torch
from sentence_transformers import SentenceTransformer

chunks = [json.loads(line)["text"] for line in open(sys.argv[1])]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
threads = int(os.environ.get("BENCH_THREADS", "0"))
if threads:
    torch.set_num_threads(threads)
device = os.environ.get("BENCH_DEVICE", "cpu")
dtype = os.environ.get("BENCH_DTYPE", "f32")
model_dir = os.environ.get("TRAWL_MODEL_DIR") or str(
    pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "trawl/models/all-MiniLM-L6-v2"
)
model = SentenceTransformer(model_dir, device=device)
# Whatever dtype the weights file holds, the model runs in the one asked for.
model = {"f16": model.half, "bf16": model.bfloat16}.get(dtype, model.float)()
assert model.max_seq_length == 256, model.max_seq_length
model.encode(chunks[:batch], batch_size=batch)  # warm-up, as on the Rust side
t, c = time.perf_counter(), time.process_time()
v = model.encode(chunks, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True)
wall, cpu = time.perf_counter() - t, time.process_time() - c
assert v.shape == (len(chunks), 384)
if len(sys.argv) > 3:
    v.astype("<f4").tofile(sys.argv[3])
print(json.dumps({
    "impl": f"sentence-transformers (torch {torch.__version__}, {device} {dtype}, {torch.get_num_threads()} threads)",
    "chunks": len(chunks), "batch": batch, "wall_s": wall, "cpu_s": cpu,
    "chunks_per_s": len(chunks) / wall, "chunks_per_cpu_s": len(chunks) / cpu,
}))
