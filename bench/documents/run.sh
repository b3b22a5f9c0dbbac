#!/usr/bin/env bash
# Documents: trawl's reader (trawl-doc, as the crawl runs it, default limits) on real files,
# beside the PDF readers it was chosen among (--compare), same files, same run. Per file:
# pages, pages/s, peak memory, and word F1 against a reference text (poppler's pdftotext
# for PDFs, pandoc's own reader for DOCX) saying what text is lost.
#
#   bench/documents/run.sh [--compare]
#
# The files: Debian's R manuals (r-doc-pdf: pdfTeX, 41 to 2,415 pages), Chromium's prints
# of Rust book pages (Skia/PDF; the whole book is 720 pages, 14.7 MB), one of them an image
# only (a scan), and the same book pages as DOCX made by pandoc (pypandoc-binary).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/target/documents-bench}
COMPARE=${1:-}
mkdir -p "$OUT/set" "$OUT/ref" "$OUT/text"
need() { command -v "$1" >/dev/null || { sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo; $sudo apt-get install -y -qq "$2" >/dev/null; }; }
need pdftotext poppler-utils
if ! ls "$OUT"/set/R-intro.pdf >/dev/null 2>&1; then
  (cd "$OUT" && apt-get download r-doc-pdf >/dev/null 2>&1 && dpkg-deb -x r-doc-pdf_*.deb deb)
  for m in R-FAQ R-data R-intro R-exts refman; do cp "$OUT/deb/usr/share/R/doc/manual/$m.pdf" "$OUT/set/"; done
fi
BOOK=$(rustc --print sysroot)/share/doc/rust/html/book
CHROME=$(command -v chromium chromium-headless-shell 2>/dev/null | head -1 || true)
if [ -n "$CHROME" ] && [ ! -f "$OUT/set/chrome-print.pdf" ]; then
  for p in ch08-01-vectors ch16-01-threads print; do
    timeout 300 "$CHROME" --headless --no-sandbox --disable-gpu \
      --print-to-pdf="$OUT/set/chrome-$p.pdf" "file://$BOOK/$p.html" 2>/dev/null || true
  done
  pdftoppm -r 60 -png -f 1 -l 1 "$OUT/set/R-intro.pdf" "$OUT/scan" && \
  echo "<html><body><img src=\"file://$OUT/scan-001.png\" style=\"width:100%\"></body></html>" > "$OUT/scan.html" && \
  timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --allow-file-access-from-files \
    --print-to-pdf="$OUT/set/scanned.pdf" "file://$OUT/scan.html" 2>/dev/null || true
fi
if [ ! -x "$OUT/pandoc-venv/bin/python" ]; then
  python3 -m venv "$OUT/pandoc-venv" && "$OUT/pandoc-venv/bin/pip" -q install pypandoc-binary
fi
PANDOC=$(ls "$OUT"/pandoc-venv/lib/python3*/site-packages/pypandoc/files/pandoc)
for p in ch03-02-data-types ch08-01-vectors ch16-01-threads appendix-01-keywords print; do
  [ -f "$OUT/set/$p.docx" ] || "$PANDOC" -f html -t docx -o "$OUT/set/$p.docx" "$BOOK/$p.html" 2>/dev/null
done
for f in "$OUT"/set/*; do
  b=$(basename "$f")
  case "$f" in
    *.pdf) pdftotext -enc UTF-8 "$f" "$OUT/ref/$b.txt" ;;
    *.docx) "$PANDOC" -f docx -t plain --wrap=none -o "$OUT/ref/$b.txt" "$f" ;;
  esac
done

cargo build --release --locked -p trawl-doc --example doc_bench
BIN=$ROOT/target/release/examples/doc_bench
score() { [ -s "$1" ] && [ -f "$2" ] && python3 bench/documents/score.py "$1" "$2" || echo "- - -"; }
echo "| file | reader | pages | seconds | pages/s | peak MiB | P | R | F1 |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for f in "$OUT"/set/*; do
  b=$(basename "$f")
  line=$(/usr/bin/time -f "%M" -o "$OUT/rss" "$BIN" "$f" "$OUT/text/$b.trawl.txt")
  read -r pages secs pps <<< "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get("pages", d.get("error")), d["secs"], d.get("pages_per_s", "-"))' "$line")"
  read -r p r f1 <<< "$(score "$OUT/ref/$b.txt" "$OUT/text/$b.trawl.txt")"
  echo "| $b | trawl | $pages | $secs | $pps | $(( $(cat "$OUT/rss") / 1024 )) | $p | $r | $f1 |"
  tpages=$pages
  if [ "$COMPARE" = --compare ] && [[ "$f" == *.pdf ]]; then
    CMP=$ROOT/bench/documents/compare/target/release/pdf-compare
    [ -x "$CMP" ] || (cd bench/documents/compare && cargo build --release --locked >&2)
    for e in pdf-extract lopdf unpdf pdf_oxide; do
      out=$(/usr/bin/time -f "%M" -o "$OUT/rss" timeout 300 "$CMP" "$e" "$f" "$OUT/text/$b.$e.txt" || echo "TIMEOUT")
      # unpdf reads a document whole: pages/s is the file's pages over its time, for all.
      read -r _ chars secs <<< "$out"
      pages=$tpages
      read -r p r f1 <<< "$(score "$OUT/ref/$b.txt" "$OUT/text/$b.$e.txt")"
      pps=$(python3 -c "import sys; print(round(float(sys.argv[1])/max(float(sys.argv[2]),1e-9),1))" "$pages" "$secs" 2>/dev/null || echo -)
      echo "| $b | $e | $pages | $secs | $pps | $(( $(cat "$OUT/rss") / 1024 )) | $p | $r | $f1 |"
    done
  fi
done
