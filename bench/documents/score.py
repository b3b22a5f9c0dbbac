"""Word-bag precision, recall and F1 of a text against a reference (lower-cased \\w+ words):
what a reader keeps and loses of a document, whatever its line breaks."""
import collections
import re
import sys


def bag(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return collections.Counter(re.findall(r"\w+", f.read().lower()))


ref, got = bag(sys.argv[1]), bag(sys.argv[2])
both = sum((ref & got).values())
r = both / max(1, sum(ref.values()))
p = both / max(1, sum(got.values()))
f = 2 * p * r / max(1e-9, p + r)
print(f"{p:.3f} {r:.3f} {f:.3f}")
