"""Retrieval at its users' scale: build, memory, latency and server throughput against corpus size.

    python -m benchmarks.scale --sizes 100000,1000000 --old d20afa5 --out runs/scale

Corpora are ``benchmarks.bench_bm25.corpus(n)``: synthetic passages of 30-70 words (plus a two-word
title) from a 50,000-word Zipf vocabulary, written as JSONL; queries are 4 words from random
passages. For each size, in the same run and on the same files:

- **new**: ``python -m mempo_env.retrieval.index`` (build), ``BM25Index`` (load, queries one at a
  time on one thread, batches of 512 on every core), ``python -m mempo_env.retrieval.server --index``;
- **old** (``--old COMMIT``, sizes up to ``--old-up-to``): the project at that commit, run from a
  ``git worktree`` of it: its ``BM25Retriever`` (bm25s, dense scores over every passage) and its server.

Every measurement runs in a fresh process (resident memory is its peak, ``ru_maxrss``; memory-mapped
pages it touched count). Server throughput: closed-loop clients (keep-alive HTTP, one query a request,
as verl's search tool sends them) from two client processes, for ``--seconds`` each. Everything goes
to ``OUT/scale.json``; the table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = (1, 16, 64, 256)

_LATENCY = r"""
import json, resource, sys, time
import numpy as np
impl, corpus, where, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.load(open(sys.argv[4]))
started = time.perf_counter()
if impl == "new":
    from mempo_env.retrieval.index import BM25Index
    one, many = BM25Index(where, threads=1), BM25Index(where)
else:
    from mempo_env.retrieval.bm25 import BM25Retriever
    from mempo_env.tasks.loaders import load_corpus
    one = many = BM25Retriever(load_corpus(corpus), cache_dir=where)
search = lambda r, qs: r.search(qs, 3)
load_s = time.perf_counter() - started
single = []
for q in queries[: int(sys.argv[5])]:
    t = time.perf_counter(); search(one, [q]); single.append(time.perf_counter() - t)
t = time.perf_counter()
batched = [h for at in range(0, len(queries), 512) for h in search(many, queries[at : at + 512])]
batch_s = time.perf_counter() - t
ranked = [[h.document.id for h in hits] for hits in batched]
print(json.dumps({"load_s": load_s, "single_p50_ms": 1e3 * float(np.percentile(single, 50)),
                  "single_p99_ms": 1e3 * float(np.percentile(single, 99)), "single_n": len(single),
                  "batched_ms_per_query": 1e3 * batch_s / len(queries), "batched_n": len(queries),
                  "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "ranked": ranked}))
"""

_CLIENT = r"""
import http.client, json, sys, threading, time
host, port, threads, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
queries = json.load(open(sys.argv[5]))
lat, errors, stop = [], [], time.monotonic() + seconds
def client(k):
    conn, i = http.client.HTTPConnection(host, port, timeout=120), k
    while time.monotonic() < stop:
        body = json.dumps({"queries": [queries[i % len(queries)]], "topk": 3}).encode()  # bytes: one send
        t = time.perf_counter()
        try:
            conn.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
            r = conn.getresponse(); data = r.read()
            assert r.status == 200 and len(json.loads(data)["result"]) == 1, data[:200]
        except Exception as e:
            errors.append(repr(e)); conn.close(); conn = http.client.HTTPConnection(host, port, timeout=120); continue
        lat.append(time.perf_counter() - t); i += threads * 7
started = time.monotonic()
ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"latencies": lat, "errors": errors[:5], "n_errors": len(errors), "wall": time.monotonic() - started}))
"""


def run_json(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_corpus(n: int, path: Path) -> None:
    from benchmarks.bench_bm25 import corpus

    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for d in corpus(n):
            f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
    tmp.rename(path)
    corpus.cache_clear()


def timed_build(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds and the peak resident GB of the largest process of the build."""
    started = time.perf_counter()
    wrapped = [sys.executable, "-c", "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)", *cmd]
    done = subprocess.run(wrapped, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"build failed:\n{done.stderr[-3000:]}")
    return {"build_s": time.perf_counter() - started, "build_rss_gb": int(done.stdout.split()[-1]) / 2**20}


def serve_and_load(cmd: list[str], env: dict[str, str], queries: Path, seconds: float) -> dict[str, Any]:
    """Start a server, drive it with 1, 16, 64 and 256 closed-loop clients, stop it."""
    import numpy as np

    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        for line in proc.stderr:
            if m := re.search(r"http://([\d.]+):(\d+)/retrieve", line):
                url = m
                break
        if url is None:
            raise RuntimeError("the server did not start")
        out = {}
        for clients in CLIENTS:
            procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, url.group(1), url.group(2), str(part),
                                       str(seconds), str(queries)], stdout=subprocess.PIPE, text=True)
                     for part in ([clients] if clients == 1 else [clients // 2, clients - clients // 2])]
            parts = [json.loads(p.communicate()[0]) for p in procs]
            lat = [x for p in parts for x in p["latencies"]]
            out[str(clients)] = {"qps": len(lat) / max(p["wall"] for p in parts),
                            "n_errors": sum(p["n_errors"] for p in parts),
                            "p50_ms": 1e3 * float(np.percentile(lat, 50)),
                            "p99_ms": 1e3 * float(np.percentile(lat, 99))}
            level = out[str(clients)]
            print(f"    {clients:>3} clients: {level['qps']:.0f} q/s, p50 {level['p50_ms']:.1f} ms", file=sys.stderr,
                  flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def old_tree(commit: str, out: Path) -> Path:
    tree = out / f"old-{commit}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)
    return tree


def measure(n: int, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    corpus_path, index = out / f"corpus-{n}.jsonl", out / f"index-{n}"
    t = time.perf_counter()
    write_corpus(n, corpus_path)
    rng = np.random.default_rng(1)
    picked = set(rng.integers(0, n, args.queries).tolist())
    queries = []
    with corpus_path.open() as f:
        for i, line in enumerate(f):
            if i in picked:
                queries.append(" ".join(rng.choice(json.loads(line)["text"].split(), 4)))
    qfile = out / f"queries-{n}.json"
    qfile.write_text(json.dumps(queries))
    print(f"{n:,} passages: corpus ready ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    row: dict[str, Any] = {"passages": n, "corpus_bytes": corpus_path.stat().st_size}
    new = timed_build([sys.executable, "-m", "mempo_env.retrieval.index", "--corpus", str(corpus_path),
                       "--out", str(index), "--workers", str(os.cpu_count() or 1)], env)
    new["disk_bytes"] = folder_bytes(index)
    new.update(run_json([sys.executable, "-c", _LATENCY, "new", str(corpus_path), str(index), str(qfile),
                         str(args.queries)], env))
    print(f"  new: build {new['build_s']:.0f} s, single {new['single_p50_ms']:.2f} ms, batched "
          f"{new['batched_ms_per_query']:.3f} ms/q", file=sys.stderr, flush=True)
    new["server"] = serve_and_load([sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(index),
                                    "--port", "0"], env, qfile, args.seconds)
    row["new"] = new
    if args.old and n <= args.old_up_to:
        tree, cache = old_tree(args.old, out), out / f"old-cache-{n}"
        old_env = {**os.environ, "PYTHONPATH": str(tree), "MEMPO_CACHE_DIR": str(cache)}
        code = ("import sys; from mempo_env.retrieval.bm25 import BM25Retriever; "
                "from mempo_env.tasks.loaders import load_corpus; BM25Retriever(load_corpus(sys.argv[1]), "
                "cache_dir=sys.argv[2])")
        old = timed_build([sys.executable, "-c", code, str(corpus_path), str(cache)], old_env)
        old["disk_bytes"] = folder_bytes(cache)
        old.update(run_json([sys.executable, "-c", _LATENCY, "old", str(corpus_path), str(cache), str(qfile),
                             str(args.old_single)], old_env))
        print(f"  old: build {old['build_s']:.0f} s, single {old['single_p50_ms']:.2f} ms, batched "
              f"{old['batched_ms_per_query']:.3f} ms/q", file=sys.stderr, flush=True)
        old["server"] = serve_and_load([sys.executable, "-m", "mempo_env.retrieval.server", "--corpus",
                                        str(corpus_path), "--port", "0"], old_env, qfile, args.seconds)
        row["same_rankings"] = old.pop("ranked") == new["ranked"]
        row["old"] = old
    new.pop("ranked")
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| passages | impl | build s | build GB | disk GB | load s | RSS GB | 1 query p50 / p99 ms | "
             "batched ms/q | " + " | ".join(f"server q/s @{c}" for c in CLIENTS) + " |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(CLIENTS)]
    for row in rows:
        for impl in ("new", "old"):
            if impl not in row:
                continue
            m = row[impl]
            server = " | ".join(f"{m['server'][str(c)]['qps']:.0f}" for c in CLIENTS)
            lines.append(f"| {row['passages']:,} | {impl} | {m['build_s']:.0f} | {m['build_rss_gb']:.1f} | "
                         f"{m['disk_bytes'] / 1e9:.2f} | {m['load_s']:.1f} | {m['rss_gb']:.1f} | "
                         f"{m['single_p50_ms']:.2f} / {m['single_p99_ms']:.2f} | {m['batched_ms_per_query']:.3f} | "
                         f"{server} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated")
    parser.add_argument("--out", default="runs/scale", help="folder for corpora, indexes and scale.json")
    parser.add_argument("--old", default=None, help="a commit to compare with (its BM25Retriever and server)")
    parser.add_argument("--old-up-to", type=int, default=1_000_000, help="the largest size the old code runs at")
    parser.add_argument("--queries", type=int, default=1000, help="queries per size")
    parser.add_argument("--old-single", type=int, default=200, help="single queries timed on the old code")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per server load level")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [measure(int(n), out, args) for n in args.sizes.split(",")]
    (out / "scale.json").write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
