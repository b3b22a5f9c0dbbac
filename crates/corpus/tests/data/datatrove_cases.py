"""Datatrove's verdicts on hand-written cases, the reference for tests/filters.rs.

Regenerate: pip install "datatrove[processing]" spacy && python3 datatrove_cases.py > datatrove_verdicts.json
(datatrove 0.10.1, run on this machine; the verdicts are what its default filters return.)
"""
import json
from datatrove.data import Document
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter, FineWebQualityFilter
good = ("The history of the harbour is long and full of change. " 
        "Fishing boats have used it since the twelfth century, and the town grew with the trade. "
        "In the nineteenth century a railway reached the quay, which brought visitors to the beach. "
        "Today the harbour is home to a lifeboat station, a small marina and a museum of local life. "
        "The museum is open every day in summer, and volunteers run guided walks along the old sea wall. "
        "Visitors can also take a boat trip to see the seals that rest on the sandbanks at low tide.")
cases = {
 "good": good,
 "short": "The cat sat on the mat with the hat.",
 "no_stop_words": " ".join(["Harbour boats quay railway visitors beach museum volunteers walks seals sandbanks tide"]*6),
 "hashes": good + " " + "#tag "*40,
 "ellipsis_lines": "\n".join(["The story of the harbour continues and it is long with the boats..."]*10),
 "bullets": "\n".join(["- The harbour has boats and the quay is old with the trade of fish"]*12),
 "dup_lines": "\n".join(["The harbour is old and the boats are many with the trade of fish."]*8 + [good]),
 "dup_paras": "\n\n".join([good, good, "The end of the story, and that is all we have to say with the boats."]),
 "top_ngram": good + " " + "the harbour " * 60,
 "lorem": good + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.",
 "curly": good + "\nThe function returns { value } to the caller, as the docs say.",
 "few_sentences": "The harbour is old and the boats are many with fish.\nThe town grew with the trade of the sea and the quay.",
 "short_lines": "\n".join(["Harbour news", "Boats", "The quay is old and long.", "Fish market", "Tides", "Museum", "Walks"]*4) + "\n" + good,
 "no_punct_lines": "\n".join(["The harbour is old and the boats are many with the trade of fish and the sea"]*3 + ["Another line about the town and the quay and the railway that reached it"]*5),
 "javascript_policy": good + "\nPlease enable JavaScript to view the comments on this page.\nThis site uses cookies to improve your experience of the site.",
}
out = {}
for name, text in cases.items():
    r = {}
    for fname, f in [("gopher_quality", GopherQualityFilter()), ("gopher_repetition", GopherRepetitionFilter()), ("c4", C4QualityFilter()), ("fineweb", FineWebQualityFilter())]:
        d = Document(text=text, id=name)
        res = f.filter(d)
        if isinstance(res, tuple):
            r[fname] = res[1] if not res[0] else "keep"
        else:
            r[fname] = "keep" if res else "drop"
        if fname == "c4" and r[fname] == "keep":
            r["c4_lines"] = d.text.count("\n") + 1
    out[name] = r
print(json.dumps({"cases": cases, "verdicts": out}, indent=1))
