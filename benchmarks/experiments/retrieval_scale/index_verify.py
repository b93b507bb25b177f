"""What checking an index costs when it is opened: the plain open's cheap checks, and ``verify=True``.

    python -m benchmarks.experiments.retrieval_scale.index_verify --sizes 100000,1000000 --out /tmp/index-verify

A plain ``BM25Index(folder)`` checks the metadata, every array's size, the posting-list offsets, the
largest weights and the vocabulary's checksum (a damaged vocabulary would make every search return
nothing); ``BM25Index(folder, verify=True)`` also reads every other file once, checksums it and checks
every posting and weight. Both are paid by every process that opens the index (a server's start, an
environment's), so both are measured here against corpus size.

For each size, ``benchmarks.bench_bm25.iter_corpus(n)`` is built into ``OUT/index-N`` (reused when an
index opens there) and measured in a fresh process: the first open (it imports the tokenizer and
loads numba's compiled scorer), then ``--rounds`` plain opens and ``--rounds`` opens with
``verify=True`` (medians), and the vocabulary's checksum alone. The page cache is warm (the build or
the first open read the files): a cold ``verify=True`` adds the time to read the index from disk.
Everything goes to ``OUT/index-verify.json``; the table is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]

_MEASURE = r"""
import json, statistics, sys, time
from pathlib import Path
from mempo_env.retrieval import index as ix
where, rounds = Path(sys.argv[1]), int(sys.argv[2])
def timed(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
first = timed(lambda: ix.BM25Index(where).close())
plain = [timed(lambda: ix.BM25Index(where).close()) for _ in range(rounds)]
verify = [timed(lambda: ix.BM25Index(where, verify=True).close()) for _ in range(rounds)]
vocab = [timed(lambda: [ix._digest(where / name) for name in ix._VOCAB]) for _ in range(rounds)]
sizes = {p.name: p.stat().st_size for p in where.resolve().iterdir() if p.is_file()}
print(json.dumps({"first_open_s": first, "open_s": statistics.median(plain), "verify_s": statistics.median(verify),
                  "vocab_checksum_s": statistics.median(vocab), "disk_bytes": sum(sizes.values()),
                  "vocab_bytes": sizes["vocab.bin"] + sizes["vocab_offsets.npy"],
                  "num_terms": ix.BM25Index(where).meta["num_terms"], "rounds": rounds}))
"""


def measure(size: int, out: Path, rounds: int, workers: int) -> dict[str, Any]:
    """Build (or reuse) the index of ``size`` passages, then time its opens in a fresh process."""
    from benchmarks.bench_bm25 import iter_corpus
    from mempo_env.retrieval.index import BM25Index, BM25IndexError, build_index

    where = out / f"index-{size}"
    try:
        BM25Index(where).close()
        print(f"{size:,} passages: reusing {where}", file=sys.stderr, flush=True)
    except BM25IndexError:
        build_index(enumerate(iter_corpus(size), 1), where, workers=workers,
                    log=lambda line: print(line, file=sys.stderr, flush=True))
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(where), str(rounds)], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return {"passages": size, **json.loads(done.stdout)}


def table(rows: list[dict[str, Any]]) -> str:
    from agents.statistics import table_head

    lines = table_head(["passages", "terms", "disk GB", "first open s", "open s", "of which vocab checksum s",
                        "verify=True s"], align="r" * 7)
    lines += [f"| {r['passages']:,} | {r['num_terms']:,} | {r['disk_bytes'] / 1e9:.2f} | {r['first_open_s']:.2f} | "
              f"{r['open_s']:.3f} | {r['vocab_checksum_s']:.3f} | {r['verify_s']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.retrieval_scale.index_verify",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated corpus sizes (passages)")
    parser.add_argument("--out", required=True, help="folder for the indexes and index-verify.json")
    parser.add_argument("--rounds", type=int, default=3, help="opens of each kind, their median reported")
    parser.add_argument("--workers", type=int, default=2, help="processes tokenising each build")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [measure(int(s), out, args.rounds, args.workers) for s in args.sizes.split(",")]
    (out / "index-verify.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
