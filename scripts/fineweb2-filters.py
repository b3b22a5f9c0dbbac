#!/usr/bin/env python3
"""Builds crates/corpus/data/fineweb2-filters.json, the per-language filter settings that
`trawl export` applies, from a checkout of https://github.com/huggingface/fineweb-2
(Apache-2.0): its configs/{iso3}_{script}.yml hold the thresholds and stop words FineWeb 2
tuned for each language.

Only the languages trawl can name are kept: those whatlang detects, under the codes FineWeb 2
files them (macro-language codes such as `ara` and `est` are mapped in Rust, lang_rules.rs).

    python3 scripts/fineweb2-filters.py /path/to/fineweb-2 > crates/corpus/data/fineweb2-filters.json
"""
import json
import pathlib
import subprocess
import sys

import yaml

# whatlang 0.18's codes, and FineWeb 2's code where it files the language under another.
WHATLANG = (
    "afr aka amh ara aze bel ben bul cat ces cmn cym dan deu ell eng epo est fin fra guj heb "
    "hin hrv hun hye ind ita jav jpn kan kat khm kor lat lav lit mal mar mkd mya nep nld nob "
    "ori pan pes pol por ron rus sin slk slv sna spa srp swe tam tel tgl tha tuk tur ukr urd "
    "uzb vie yid zul"
).split()
FW2_CODE = {
    "ara": "arb", "aze": "azj", "est": "ekk", "lav": "lvs", "nep": "npi", "ori": "ory",
    "pes": "fas", "tgl": "fil", "uzb": "uzn", "yid": "ydd",
    # Common Crawl's WET labels (CLD2's ISO 639-3) that whatlang names otherwise.
    "zho": "cmn", "msa": "zsm", "nor": "nob", "swa": "swh", "fas": "fas",
}
KEYS = (
    "dup_line_frac", "dup_n_grams", "top_n_grams", "line_punct_thr", "new_line_ratio",
    "max_avg_word_length", "min_avg_word_length", "max_non_alpha_words_ratio", "stopwords",
    "language_score",
)


def main(repo: str) -> None:
    root = pathlib.Path(repo)
    wanted = {FW2_CODE.get(c, c) for c in WHATLANG} | set(FW2_CODE.values())
    out: dict = {}
    for path in sorted((root / "configs").glob("*.yml")):
        code, _, script = path.stem.partition("_")
        if code not in wanted:
            continue
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
        missing = [k for k in KEYS if k not in cfg]
        if missing:
            sys.exit(f"{path}: no {missing}")
        row = {k: cfg[k] for k in KEYS}
        row["dup_n_grams"] = [[int(n), float(f)] for n, f in cfg["dup_n_grams"]]
        row["top_n_grams"] = [[int(n), float(f)] for n, f in cfg["top_n_grams"]]
        out.setdefault(code, {})[script] = row
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    doc = {
        "source": "https://github.com/huggingface/fineweb-2 configs/",
        "commit": commit or "unknown",
        "license": "Apache-2.0",
        "languages": out,
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
