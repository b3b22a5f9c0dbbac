"""The peer: datatrove's equivalent of `trawl ingest` + `trawl export` on one core.

WarcReader -> Trafilatura -> GopherRepetition -> GopherQuality -> C4 -> FineWeb -> JsonlWriter,
the filters with their defaults (FineWeb's own order), one task, one worker.
usage: datatrove_pipeline.py WARC_DIR OUT_DIR
"""
import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter,
                                        GopherQualityFilter, GopherRepetitionFilter)
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter

src, out = sys.argv[1], sys.argv[2]
LocalPipelineExecutor(
    pipeline=[
        WarcReader(src, glob_pattern="*.warc.gz"),
        Trafilatura(favour_precision=True),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(),
        FineWebQualityFilter(),
        JsonlWriter(f"{out}/output", compression=None),
    ],
    tasks=1,
    workers=1,
    logging_dir=f"{out}/logs",
).run()
