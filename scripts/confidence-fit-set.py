#!/usr/bin/env python3
"""Draws the training-split questions both confidence models (src/decoding/confidence-model.ts, greedy;
confidence-model-vote.ts, tree-prune-4) were fitted on, from the sets `npx tsx lab/scripts/realdata.ts --out DIR --seed 1 --sources wikisql,spider
--no-traces` writes:

    python3 scripts/confidence-fit-set.py DIR        # writes DIR/confidence_fit.json (600 questions)

300 Spider train questions, 150 WikiSQL train questions, and 150 other Spider train questions asked
of another Spider train database that shares no table name with theirs (marked "answerable": false,
no gold SQL), all drawn with Python's random.Random(7). Standard library only."""

import json
import os
import random
import sqlite3
import sys


def tables(root: str, db: str) -> set:
    path = os.path.join(root, "databases", db, f"{db}.sqlite")
    if not os.path.exists(path):
        path = os.path.join(root, "databases", f"{db}.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0].lower() for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def main(root: str) -> None:
    spider = json.load(open(os.path.join(root, "spider_train.json")))
    wikisql = json.load(open(os.path.join(root, "wikisql_train.json")))
    rng = random.Random(7)
    answerable = rng.sample(spider, 300)
    wiki = rng.sample(wikisql, 150)
    dbs = sorted({q["db_id"] for q in spider})
    names = {d: tables(root, d) for d in dbs}
    rest = [q for q in spider if q not in answerable]
    swapped = []
    for q in rng.sample(rest, 150):
        others = [d for d in dbs if d != q["db_id"] and not (names[d] & names[q["db_id"]])]
        swapped.append(
            {"question_id": 0, "db_id": rng.choice(others), "question": q["question"], "evidence": q.get("evidence", ""), "SQL": None, "answerable": False}
        )
    items = answerable + wiki + swapped
    for i, q in enumerate(items):
        q["question_id"] = i
    out = os.path.join(root, "confidence_fit.json")
    json.dump(items, open(out, "w"))
    print(f"wrote {out}: {len(items)} questions")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
