"""Retrieval at its users' scale: build, memory, latency and server throughput against corpus size.

    python -m benchmarks.experiments.retrieval_scale.scale --sizes 100000,1000000 --old d20afa5 --out runs/scale
    python -m benchmarks.experiments.retrieval_scale.scale --sizes 100000,1000000,5000000 --old d20afa5 \\
        --lucene .venv-pyserini/bin/python

Corpora are ``benchmarks.bench_bm25.iter_corpus(n)``: synthetic passages of 30-70 words (plus a two-word
title) from a 50,000-word Zipf vocabulary, written as JSONL; queries are 4 words from random
passages. For each size, in the same run and on the same files:

- **new**: ``python -m mempo_env.retrieval.index`` (build), ``BM25Index`` (load, queries one at a
  time on one thread, batches of 512 on every core), ``python -m mempo_env.retrieval.server --index``;
- **old** (``--old COMMIT``, sizes up to ``--old-up-to``): the project at that commit, run from a
  ``git worktree`` of it: its ``BM25Retriever`` (bm25s, dense scores over every passage) and its server;
- **lucene** (``--lucene PYTHON``, sizes up to ``--lucene-up-to``): ``lucene.py`` beside this module in
  pyserini's own environment: Lucene BM25 as Search-R1's BM25 server runs it (its per-query loop is "single",
  pyserini's ``batch_search`` on every core "batched"; no server: Search-R1's answers a request with
  that loop), and the share of its top-3 hits the new index also returns.

Every measurement runs in a fresh process (resident memory is its peak, ``ru_maxrss``; memory-mapped
pages it touched count). Server throughput: closed-loop clients (keep-alive HTTP, one query a request,
as verl's search tool sends them; then 4 clients of 128 queries a request, as Search-R1's rollout
loop sends a turn's queries) from two client processes on the same cores, for ``--seconds`` each.
Everything goes to ``OUT/scale.json`` with the new index's cost per passage between the two largest
sizes and wiki-18 (21M passages) at that rate, an extrapolation; the table is printed.
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

ROOT = Path(__file__).resolve().parents[3]  # the repository: benchmarks/experiments/retrieval_scale/scale.py
CLIENTS = (1, 16, 64, 256)  # closed-loop clients sending one query a request, as verl's search tool does
BATCHED = (4, 128)  # and 4 clients sending 128 queries a request, as Search-R1's rollout loop does
WIKI18 = 21_015_324  # passages in Search-R1's wiki-18 corpus, for the extrapolation

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
t = time.perf_counter(); search(one, queries[:1]); search(many, queries[:1]); first_s = time.perf_counter() - t
single = []
for q in queries[: int(sys.argv[5])]:
    t = time.perf_counter(); search(one, [q]); single.append(time.perf_counter() - t)
t = time.perf_counter()
batched = [h for at in range(0, len(queries), 512) for h in search(many, queries[at : at + 512])]
batch_s = time.perf_counter() - t
ranked = [[h.document.id for h in hits] for hits in batched]
print(json.dumps({"load_s": load_s, "first_query_s": first_s, "single_p50_ms": 1e3 * float(np.percentile(single, 50)),
                  "single_p99_ms": 1e3 * float(np.percentile(single, 99)), "single_n": len(single),
                  "batched_ms_per_query": 1e3 * batch_s / len(queries), "batched_n": len(queries),
                  "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "ranked": ranked,
                  "module": sys.modules["mempo_env"].__file__}))
"""

_CLIENT = r"""
import http.client, json, sys, threading, time
host, port, threads, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
queries, per_request = json.load(open(sys.argv[5])), int(sys.argv[6])
lat, errors, stop = [], [], time.monotonic() + seconds
def client(k):
    conn, i = http.client.HTTPConnection(host, port, timeout=120), k
    while time.monotonic() < stop:
        batch = [queries[(i + j) % len(queries)] for j in range(per_request)]
        body = json.dumps({"queries": batch, "topk": 3}).encode()  # bytes: one send
        t = time.perf_counter()
        try:
            conn.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
            r = conn.getresponse(); data = r.read()
            assert r.status == 200 and len(json.loads(data)["result"]) == per_request, data[:200]
        except Exception as e:
            errors.append(repr(e)); conn.close(); conn = http.client.HTTPConnection(host, port, timeout=120); continue
        lat.append(time.perf_counter() - t); i += threads * 7 * per_request
started = time.monotonic()
ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"latencies": lat, "queries": len(lat) * per_request, "errors": errors[:5], "n_errors": len(errors),
                  "wall": time.monotonic() - started}))
"""


def run_json(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> dict[str, Any]:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_corpus(n: int, path: Path) -> None:
    from benchmarks.bench_bm25 import iter_corpus

    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for d in iter_corpus(n):
            f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
    tmp.rename(path)


def lucene(python: str, corpus: Path, queries: list[str], work: Path) -> dict[str, Any]:
    """``lucene.py`` beside this module (pyserini, in its own environment) on the same corpus and queries, in
    the row shape of the others: Search-R1's per-query loop as "single", ``batch_search`` as "batched"."""
    qfile = work.with_suffix(".queries.txt")
    qfile.write_text("".join(q + "\n" for q in queries))
    result = work.with_suffix(".json")
    script = Path(__file__).with_name("lucene.py")
    subprocess.run([python, str(script), "--corpus", str(corpus), "--queries", str(qfile),
                    "--work", str(work), "--topk", "3", "--threads", str(os.cpu_count() or 1), "--out", str(result)],
                   check=True, stdout=sys.stderr)
    r = json.loads(result.read_text())
    index, load = r["index"], r["load"]
    return {"build_s": index["convert_s"] + index["build_s"], "build_rss_gb": index["build_peak_rss_bytes"] / 2**30,
            "disk_bytes": index["index_bytes"], "load_s": load["searcher_load_s"] + load["corpus_load_s"],
            "rss_gb": r["peak_rss_bytes"] / 2**30, "single_p50_ms": r["single"]["p50_ms"],
            "single_p99_ms": r["single"]["p99_ms"], "batched_ms_per_query": 1e3 / r["batch"]["queries_per_s"],
            "versions": {k: r[k] for k in ("pyserini", "java", "lucene")}, "index_reused": index["reused"],
            "ranked": r["ranked_ids"]}


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    """The mean share of one ranking's hits that the other also returns (order aside)."""
    return sum(len(set(x) & set(y)) / max(len(x), len(y), 1) for x, y in zip(a, b)) / len(a)


def timed_build(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> dict[str, float]:
    """Wall seconds and the peak resident GB of the largest process of the build."""
    started = time.perf_counter()
    wrapped = [sys.executable, "-c", "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)", *cmd]
    done = subprocess.run(wrapped, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode:
        raise RuntimeError(f"build failed:\n{done.stderr[-3000:]}")
    return {"build_s": time.perf_counter() - started, "build_rss_gb": int(done.stdout.split()[-1]) / 2**20}


def serve_and_load(cmd: list[str], env: dict[str, str], queries: Path, seconds: float,
                   cwd: Path = ROOT) -> dict[str, Any]:
    """Start a server, drive it with 1, 16, 64 and 256 closed-loop clients of one query a request and
    then with ``BATCHED`` clients of many, stop it. Keys: the client count, and ``"4x128"``."""
    import numpy as np

    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        url = None
        for line in proc.stderr:
            if m := re.search(r"http://([\d.]+):(\d+)/retrieve", line):
                url = m
                break
        if url is None:
            raise RuntimeError("the server did not start")
        out = {}
        for clients, per_request in [(c, 1) for c in CLIENTS] + [BATCHED]:
            procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, url.group(1), url.group(2), str(part),
                                       str(seconds), str(queries), str(per_request)], stdout=subprocess.PIPE, text=True)
                     for part in ([clients] if clients == 1 else [clients // 2, clients - clients // 2])]
            parts = [json.loads(p.communicate()[0]) for p in procs]
            lat = [x for p in parts for x in p["latencies"]]
            key = str(clients) if per_request == 1 else f"{clients}x{per_request}"
            out[key] = {"qps": sum(p["queries"] for p in parts) / max(p["wall"] for p in parts),
                        "n_errors": sum(p["n_errors"] for p in parts),
                        "p50_ms": 1e3 * float(np.percentile(lat, 50)),
                        "p99_ms": 1e3 * float(np.percentile(lat, 99))}
            print(f"    {key:>5} clients: {out[key]['qps']:.0f} q/s, request p50 {out[key]['p50_ms']:.1f} ms",
                  file=sys.stderr, flush=True)
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
    if not Path(module := new.pop("module")).is_relative_to(ROOT):
        raise RuntimeError(f"the new code's run imported {module}, not {ROOT}")
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
        old = timed_build([sys.executable, "-c", code, str(corpus_path), str(cache)], old_env, tree)
        old["disk_bytes"] = folder_bytes(cache)
        old.update(run_json([sys.executable, "-c", _LATENCY, "old", str(corpus_path), str(cache), str(qfile),
                             str(args.old_single)], old_env, tree))
        if not Path(module := old.pop("module")).is_relative_to(tree):  # the cwd comes first on sys.path
            raise RuntimeError(f"the old code's run imported {module}, not the worktree {tree}")
        print(f"  old: build {old['build_s']:.0f} s, single {old['single_p50_ms']:.2f} ms, batched "
              f"{old['batched_ms_per_query']:.3f} ms/q", file=sys.stderr, flush=True)
        old["server"] = serve_and_load([sys.executable, "-m", "mempo_env.retrieval.server", "--corpus",
                                        str(corpus_path), "--port", "0"], old_env, qfile, args.seconds, tree)
        row["same_rankings"] = old.pop("ranked") == new["ranked"]
        row["old"] = old
    if args.lucene and n <= args.lucene_up_to:
        row["lucene"] = lucene(args.lucene, corpus_path, queries, out / f"lucene-{n}")
        row["lucene_overlap"] = overlap(row["lucene"].pop("ranked"), new["ranked"])
        print(f"  lucene: build {row['lucene']['build_s']:.0f} s, single {row['lucene']['single_p50_ms']:.2f} ms, "
              f"batched {row['lucene']['batched_ms_per_query']:.3f} ms/q; top-3 overlap with new "
              f"{row['lucene_overlap']:.2f}", file=sys.stderr, flush=True)
    new.pop("ranked")
    return row


LEVELS = [str(c) for c in CLIENTS] + ["{}x{}".format(*BATCHED)]


def table(rows: list[dict[str, Any]]) -> str:
    from agents.statistics import table_head

    lines = table_head(["passages", "impl", "build s", "build GB", "disk GB", "load s", "RSS GB",
                        "1 query p50 / p99 ms", "batched ms/q", *(f"server q/s @{c}" for c in LEVELS)],
                       align="rl" + "r" * (7 + len(LEVELS)))
    for row in rows:
        for impl in ("new", "old", "lucene"):
            if impl not in row:
                continue
            m = row[impl]
            server = " | ".join(f"{m['server'][c]['qps']:.0f}" if c in m.get("server", {}) else "" for c in LEVELS)
            lines.append(f"| {row['passages']:,} | {impl} | {m['build_s']:.0f} | {m['build_rss_gb']:.1f} | "
                         f"{m['disk_bytes'] / 1e9:.2f} | {m['load_s']:.1f} | {m['rss_gb']:.1f} | "
                         f"{m['single_p50_ms']:.2f} / {m['single_p99_ms']:.2f} | {m['batched_ms_per_query']:.3f} | "
                         f"{server} |")
    return "\n".join(lines)


def extrapolate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The new index's cost per passage between the two largest sizes measured, and wiki-18's size
    (21M passages) at that rate: an extrapolation, linear in passages, not a measurement."""
    a, b = sorted(rows, key=lambda r: r["passages"])[-2:]
    per = {key: (b["new"][key] - a["new"][key]) / (b["passages"] - a["passages"])
           for key in ("build_s", "build_rss_gb", "disk_bytes", "batched_ms_per_query")}
    at = {key: b["new"][key] + per[key] * (WIKI18 - b["passages"]) for key in per}
    return {"from": [a["passages"], b["passages"]], "per_passage": per, "wiki18": at}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.retrieval_scale.scale",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated")
    parser.add_argument("--out", default="runs/scale", help="folder for corpora, indexes and scale.json")
    parser.add_argument("--old", default=None, help="a commit to compare with (its BM25Retriever and server)")
    parser.add_argument("--old-up-to", type=int, default=1_000_000, help="the largest size the old code runs at")
    parser.add_argument("--queries", type=int, default=1000, help="queries per size")
    parser.add_argument("--old-single", type=int, default=200, help="single queries timed on the old code")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per server load level")
    parser.add_argument("--lucene", default=None,
                        help="the python of pyserini's environment (scripts/install_pyserini.sh: "
                             ".venv-pyserini/bin/python), to run Lucene BM25 on the same corpora")
    parser.add_argument("--lucene-up-to", type=int, default=10_000_000, help="the largest size Lucene runs at")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [measure(int(n), out, args) for n in args.sizes.split(",")]
    result: dict[str, Any] = {"cpus": os.cpu_count(), "rows": rows}
    if len(rows) > 1:
        result["extrapolation"] = extrapolate(rows)
    (out / "scale.json").write_text(json.dumps(result, indent=1))
    print(table(rows))
    if "extrapolation" in result:
        w, sizes = result["extrapolation"]["wiki18"], result["extrapolation"]["from"]
        print(f"\nwiki-18 (21M passages), extrapolated linearly from {sizes[0]:,} and {sizes[1]:,}: build "
              f"{w['build_s'] / 60:.0f} min and {w['build_rss_gb']:.1f} GB, {w['disk_bytes'] / 1e9:.1f} GB on disk, "
              f"{w['batched_ms_per_query']:.2f} ms a query batched")


if __name__ == "__main__":
    main()
