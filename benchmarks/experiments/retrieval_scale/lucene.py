"""Lucene BM25 through pyserini, run the way Search-R1's BM25 server runs it: the scale benchmark's anchor.

    .venv-pyserini/bin/python benchmarks/experiments/retrieval_scale/lucene.py --corpus C.jsonl --queries Q.txt \\
        --work DIR --topk 3 --threads 2 --out R.json

It runs in pyserini's own environment (``scripts/install_pyserini.sh``), which lacks the project, so it
imports nothing from it; the project's benchmarks call it through a subprocess and compare R.json with
their own numbers. What it mirrors, read from Search-R1 (PeterGriffinJin/Search-R1 at a14dc3a):

- the index: ``search_r1/search/index_builder.py`` lines 129-161 copy the corpus JSONL (rows
  ``{id, contents}``) into a folder and run ``python -m pyserini.index.lucene --collection
  JsonCollection --generator DefaultLuceneDocumentGenerator`` (with ``--threads 1``; here
  ``--threads``, recorded), without ``--storeRaw``; ``--store-raw`` adds it;
- the searcher: ``retrieval_server.py`` line 150, ``LuceneSearcher(index_path)`` with pyserini's default
  similarity (BM25, k1=0.9, b=0.4: read back from the Java searcher and recorded, not assumed);
- the contents: lines 156-157 test ``searcher.doc(0).raw()``; an index that stores raw documents gives
  each hit's ``json.loads(searcher.doc(hit.docid).raw())['contents']`` (lines 174-186), one that does not
  (Search-R1's own builder) gives ``corpus[int(hit.docid)]`` from ``datasets.load_dataset('json', ...,
  num_proc=4)`` (lines 18-25, 34-36, 153, 188): ids must then be the row numbers, as in wiki-18;
- a request: ``_batch_search`` (lines 195-205) loops over its queries, one ``searcher.search(query,
  num)`` and its contents each (``_search``, lines 159-193). That loop is the "single" measurement;
  pyserini's own multi-threaded ``batch_search(queries, qids, k, threads)`` (hit ids only) is "batch".

Rows are ``{id, title, text}`` (contents ``"Title"\\ntext``, as ``mempo_env.types.Document.contents``)
or ``{id, contents}``; blank lines are skipped, as the project's corpus loader does. A bad row, a repeated
id, an empty passage or non-UTF-8 bytes stop it with the row number before anything is indexed.

DIR keeps ``collection/`` (the JsonCollection file, which the datasets lookup also reads), ``index/``
(Lucene), ``hf-datasets/`` (datasets' Arrow cache) and ``index.json``, written once a build has
succeeded: a later run whose corpus file has the same SHA-256 and the same ``--store-raw`` reuses the
index (``index.reused`` in R.json, with the build's numbers as measured then). Build memory is the peak
resident set of the indexer process (it hosts the JVM through pyjnius), from ``wait4``; search memory is
this process's (same), from ``/proc/self/status``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SEARCH_R1 = "PeterGriffinJin/Search-R1@a14dc3a search_r1/search/{index_builder,retrieval_server}.py"
DATASETS_NUM_PROC = 4  # retrieval_server.py line 23


class InputError(Exception):
    """A corpus, query file or work folder this script refuses, with where and why."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="JSONL rows {id, title, text} or {id, contents}")
    p.add_argument("--queries", type=Path, required=True, help="one query a line")
    p.add_argument("--work", type=Path, required=True, help="folder for the collection, index and caches")
    p.add_argument("--topk", type=int, default=3, help="hits per query (Search-R1's launch scripts: 3)")
    p.add_argument("--threads", type=int, default=2, help="indexer threads and batch_search threads")
    p.add_argument("--store-raw", action="store_true",
                   help="index with --storeRaw: contents come from the index, not a datasets corpus")
    p.add_argument("--out", type=Path, required=True, help="results JSON")
    args = p.parse_args(argv)
    if args.topk < 1 or args.threads < 1:
        p.error("--topk and --threads must be at least 1")
    return args


# ---------------------------------------------------------------- input


def read_queries(path: Path) -> list[str]:
    """The queries of ``path``, one a line; an empty line or non-UTF-8 bytes are refused."""
    if not path.is_file():
        raise InputError(f"{path}: no such query file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 (byte offset {e.start})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            raise InputError(f"{path} line {n}: empty query")
    if not lines:
        raise InputError(f"{path}: no queries")
    return lines


def contents_of(row: Any, where: str) -> tuple[str, str]:
    """``(id, contents)`` of one corpus row, in Search-R1's ``"Title"\\ntext`` rendering."""
    if not isinstance(row, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
    rid = row.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise InputError(f"{where}: 'id' must be a string or an integer, got {rid!r:.80}")
    if "title" in row or "text" in row:
        title, text = row.get("title"), row.get("text")
        if not isinstance(title, str) or not isinstance(text, str):
            raise InputError(f"{where}: 'title' and 'text' must both be strings")
        if not (title.strip() or text.strip()):
            raise InputError(f"{where}: empty passage (id {rid!r})")
        return str(rid), f'"{title}"\n{text}'
    contents = row.get("contents")
    if not isinstance(contents, str):
        raise InputError(f"{where}: expected string fields 'title' and 'text', or 'contents'")
    if not contents.strip().strip('"').strip():
        raise InputError(f"{where}: empty passage (id {rid!r})")
    return str(rid), contents


def convert_corpus(src: Path, dest: Path, *, ids_are_rows: bool) -> int:
    """Write ``src`` as a pyserini JsonCollection file ``dest`` (rows ``{id, contents}``); the row count.

    ``ids_are_rows``: Search-R1 reads a hit's contents as ``corpus[int(docid)]``, so each id must be
    its row's position (0, 1, ...) or a hit would show another passage.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    first_line: dict[str, int] = {}
    with src.open("rb") as f, dest.open("w", encoding="utf-8") as out:
        for n, raw in enumerate(f, 1):
            where = f"{src} line {n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{where}: not UTF-8 (byte 0x{raw[e.start]:02x})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{where}: not JSON ({e.msg}; a truncated file?)") from None
            rid, contents = contents_of(row, where)
            if rid in first_line:
                raise InputError(f"{where}: duplicate id {rid!r} (first at line {first_line[rid]})")
            if ids_are_rows and rid != str(len(first_line)):
                raise InputError(
                    f"{where}: id {rid!r} is not its row number {len(first_line)}: without --store-raw, "
                    "Search-R1 reads a hit's contents as corpus[int(docid)], so ids must be 0, 1, ...")
            first_line[rid] = n
            out.write(json.dumps({"id": rid, "contents": contents}, ensure_ascii=False) + "\n")
    if not first_line:
        raise InputError(f"{src}: no passages")
    return len(first_line)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def rss_bytes() -> tuple[int, int]:
    """This process's ``(resident, peak resident)`` bytes; the JVM that pyjnius starts lives in it."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


# ---------------------------------------------------------------- index


def build_index(collection: Path, index: Path, threads: int, store_raw: bool, log: Path) -> tuple[float, int]:
    """Run Search-R1's indexer command; ``(seconds, peak RSS bytes of the indexer process)``."""
    cmd = [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection",
           "--input", str(collection), "--index", str(index),
           "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads)]
    if store_raw:
        cmd.append("--storeRaw")
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the indexer exited with {proc.returncode} (log {log}):\n{tail}")
    return seconds, usage.ru_maxrss * 1024


def prepare_index(args: argparse.Namespace, pyserini_version: str) -> dict[str, Any]:
    """The index for ``args.corpus`` in ``args.work``: reused when its manifest matches, else built."""
    if not args.corpus.is_file():
        raise InputError(f"{args.corpus}: no such corpus file")
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    manifest, collection, index = work / "index.json", work / "collection", work / "index"
    start = time.perf_counter()
    digest = file_sha256(args.corpus)
    hash_s = time.perf_counter() - start
    want = {"corpus_sha256": digest, "store_raw": args.store_raw, "pyserini": pyserini_version}
    if manifest.is_file() and index.is_dir():
        built = json.loads(manifest.read_text())
        if all(built.get(k) == v for k, v in want.items()):
            return {**built, "reused": True, "hash_s": hash_s, "index_bytes": dir_bytes(index)}
    staged = work / "collection.new"  # a refused corpus leaves the index already in DIR as it was
    remove(staged)
    start = time.perf_counter()
    try:
        num_docs = convert_corpus(args.corpus, staged / "docs.jsonl", ids_are_rows=not args.store_raw)
    except BaseException:
        remove(staged)
        raise
    convert_s = time.perf_counter() - start
    for stale in (manifest, collection, index, work / "hf-datasets"):
        remove(stale)
    staged.rename(collection)
    build_s, peak = build_index(collection, index, args.threads, args.store_raw, work / "build.log")
    built = {**want, "num_docs": num_docs, "build_threads": args.threads, "convert_s": convert_s,
             "build_s": build_s, "build_peak_rss_bytes": peak,
             "collection_bytes": dir_bytes(collection), "command": "python -m pyserini.index.lucene "
             "--collection JsonCollection --generator DefaultLuceneDocumentGenerator"
             + (" --storeRaw" if args.store_raw else "")}
    manifest.write_text(json.dumps(built, indent=1))
    return {**built, "reused": False, "hash_s": hash_s, "index_bytes": dir_bytes(index)}


# ---------------------------------------------------------------- search


def search_r1_search(searcher: Any, corpus: Any, query: str, num: int) -> tuple[list[dict[str, Any]], list[str], float]:
    """Search-R1's ``BM25Retriever._search`` (retrieval_server.py lines 159-193): the hit documents as its
    server returns them, their ids, and the seconds of the ``searcher.search`` call alone (the rest is
    the contents fetch). ``corpus`` None: the contents come from the index's raw documents."""
    start = time.perf_counter()
    hits = searcher.search(query, num)
    search_s = time.perf_counter() - start
    if len(hits) < 1:
        return [], [], search_s
    hits = hits[:num]
    if corpus is None:
        all_contents = [json.loads(searcher.doc(hit.docid).raw())["contents"] for hit in hits]
        results = [{"title": c.split("\n")[0].strip('"'), "text": "\n".join(c.split("\n")[1:]), "contents": c}
                   for c in all_contents]
    else:
        results = [corpus[int(hit.docid)] for hit in hits]
    return results, [hit.docid for hit in hits], search_s


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Build or reuse the index, load it as Search-R1's server does, time both ways of searching."""
    queries = read_queries(args.queries)
    os.environ["HF_DATASETS_CACHE"] = str(args.work.resolve() / "hf-datasets")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from importlib.metadata import version

    import numpy as np

    pyserini_version = version("pyserini")
    index_info = prepare_index(args, pyserini_version)

    rss_start, _ = rss_bytes()
    start = time.perf_counter()
    from pyserini.search.lucene import LuceneSearcher  # first: it puts Anserini's jar on the JVM's classpath

    # isort: split
    from jnius import autoclass, cast
    import_s = time.perf_counter() - start
    rss_imported, _ = rss_bytes()

    start = time.perf_counter()
    searcher = LuceneSearcher(str(args.work / "index"))
    contain_doc = searcher.doc(0).raw() is not None  # retrieval_server.py line 157
    searcher_load_s = time.perf_counter() - start
    corpus, corpus_load_s = None, 0.0
    corpus_cache_warm = (args.work / "hf-datasets").is_dir()
    if not contain_doc:
        import datasets

        start = time.perf_counter()
        corpus = datasets.load_dataset("json", data_files=str(args.work / "collection" / "docs.jsonl"),
                                       split="train", num_proc=DATASETS_NUM_PROC)
        corpus_load_s = time.perf_counter() - start
    if searcher.num_docs != index_info["num_docs"]:
        raise RuntimeError(f"the index holds {searcher.num_docs} documents, the corpus {index_info['num_docs']}")
    rss_loaded, _ = rss_bytes()
    similarity = cast("org.apache.lucene.search.similarities.BM25Similarity", searcher.object.get_similarity())

    def loop() -> tuple[list[float], list[float], list[list[str]]]:
        seconds, search_seconds, ids = [], [], []
        for q in queries:
            t = time.perf_counter()
            _, hit_ids, search_s = search_r1_search(searcher, corpus, q, args.topk)
            seconds.append(time.perf_counter() - t)
            search_seconds.append(search_s)
            ids.append(hit_ids)
        return seconds, search_seconds, ids

    warm_single, _, _ = loop()  # the JIT compiles the search path; a long-running server is past this
    single, search_only, ranked = loop()
    qids = [str(i) for i in range(len(queries))]

    def batch() -> tuple[float, dict[str, Any]]:
        t = time.perf_counter()
        out = searcher.batch_search(queries, qids, args.topk, args.threads)
        return time.perf_counter() - t, out

    warm_batch_s, _ = batch()
    batch_s, batch_hits = batch()
    batch_ids = [[hit.docid for hit in batch_hits[qid]] for qid in qids]
    rss_end, rss_peak = rss_bytes()
    ms, search_ms = np.asarray(single) * 1000, np.asarray(search_only) * 1000
    return {
        "tool": "pyserini (Lucene BM25), Search-R1's BM25 retriever",
        "mirrors": SEARCH_R1,
        "pyserini": pyserini_version,
        "java": autoclass("java.lang.System").getProperty("java.version"),
        "lucene": autoclass("org.apache.lucene.util.Version").LATEST.toString(),
        "corpus": str(args.corpus),
        "num_docs": index_info["num_docs"],
        "num_queries": len(queries),
        "topk": args.topk,
        "threads": args.threads,
        "cpus": len(os.sched_getaffinity(0)),
        "similarity": {"java": similarity.toString(), "k1": round(similarity.getK1(), 6),
                       "b": round(similarity.getB(), 6)},
        "index": index_info,
        "load": {
            "import_s": import_s,
            "searcher_load_s": searcher_load_s,
            "contents_from": "index raw documents" if contain_doc else "datasets corpus[int(docid)]",
            "corpus_load_s": corpus_load_s,
            "corpus_cache_warm": corpus_cache_warm and not contain_doc,
            "rss_before_import_bytes": rss_start,
            "rss_after_import_bytes": rss_imported,
            "rss_after_load_bytes": rss_loaded,
        },
        "single": {
            "what": "Search-R1's per-query loop: searcher.search(q, k) and the hits' contents, one query at a time",
            "warmup_s": sum(warm_single),
            "total_s": sum(single),
            "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()),
            "queries_per_s": len(queries) / sum(single),
            "search_call_p50_ms": float(np.percentile(search_ms, 50)),
            "search_call_p99_ms": float(np.percentile(search_ms, 99)),
        },
        "batch": {
            "what": f"searcher.batch_search(queries, qids, k, threads={args.threads}): hit ids, no contents",
            "warmup_s": warm_batch_s,
            "total_s": batch_s,
            "queries_per_s": len(queries) / batch_s,
            "same_ids_as_single": batch_ids == ranked,
        },
        "rss_after_search_bytes": rss_end,
        "peak_rss_bytes": rss_peak,
        "ranked_ids": ranked,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        result = measure(args)
    except InputError as e:
        sys.exit(f"lucene.py: error: {e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    i, s, b = result["index"], result["single"], result["batch"]
    print(f"{result['num_docs']} docs, {result['num_queries']} queries, top-{result['topk']}: "
          f"build {i['build_s']:.1f} s{' (reused)' if i['reused'] else ''}, index {i['index_bytes'] / 1e6:.0f} MB, "
          f"single p50 {s['p50_ms']:.2f} ms p99 {s['p99_ms']:.2f} ms, batch {b['queries_per_s']:.0f} q/s -> {args.out}")


if __name__ == "__main__":
    main()
