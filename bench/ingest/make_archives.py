"""Writes ARCHIVES gzip WARC files, each the records of SRC repeated COPIES times, every
record under a fresh WARC-Record-ID (one gzip member a record), so that each archive is new
work for an ingest and a repeat is a copy by content, not the same record read twice.

    python3 make_archives.py SRC ARCHIVES COPIES OUTDIR
"""

import gzip
import re
import sys
import uuid
from pathlib import Path

src, archives, copies, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)
data = gzip.open(src, "rb").read()
starts = [m.start() for m in re.finditer(rb"(?m)^WARC/1\.[01]\r\n", data)]
records = [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]
rid = re.compile(rb"WARC-Record-ID: <urn:uuid:[0-9a-fA-F-]+>")
for a in range(archives):
    with open(out / f"part-{a:03d}.warc.gz", "wb") as f:
        for _ in range(copies):
            for r in records:
                r = rid.sub(f"WARC-Record-ID: <urn:uuid:{uuid.uuid4()}>".encode(), r, count=1)
                f.write(gzip.compress(r, compresslevel=1))
print(f"{archives} archives of {copies * len(records)} records in {out}", file=sys.stderr)
