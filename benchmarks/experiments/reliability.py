"""Faults on the scale paths and in the learner's run folder, tried as a hostile user would: one
bounded command, real processes and real signals, loopback only.

    python -m benchmarks.experiments.reliability                          # every case
    python -m benchmarks.experiments.reliability --cases server,requests  # some of them

A case starts real processes, injects faults (SIGKILL of the retrieval server, of the index builder
and of the learner; damaged index folders; replicas serving different corpora; hostile HTTP
requests; a run folder held twice) and sorts each try into one outcome:

- ``refused``: refused clearly: a non-zero exit whose last line says why and whose output holds no
  traceback, the project's own error with a one-line message, or an HTTP 4xx reply;
- ``correct``: absorbed: nothing left running or lost, and the result equals a fault-free run's;
- ``silent``: an answer came back as if nothing had happened, and it is wrong;
- ``failed``: anything else: a traceback, a hang past the case's bound, a process left serving, a
  file of the user's deleted.

Every try must end ``refused`` or ``correct`` (the table's last two columns are the defects): the
command exits 1 otherwise. Each case's folder is a fresh temporary one, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("refused", "correct", "silent", "failed")


@dataclass
class Try:
    case: str
    fault: str
    outcome: str
    detail: str = ""


def clear_refusal(proc: subprocess.CompletedProcess) -> bool:
    """A non-zero exit that says why in its last line, with no traceback anywhere in its output."""
    text = (proc.stdout or "") + (proc.stderr or "")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return proc.returncode != 0 and bool(lines) and "Traceback" not in text


def last_line(text: str | None) -> str:
    """What a try's output ends with, for the report: its last non-empty line, at most 200 characters."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def python(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          **kwargs)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by whoever adopted it, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- the corpora and indexes every case starts from ---------------------------------------------------

def write_corpus(path: Path, n: int, seed: int = 0, extra: list[dict] = ()) -> Path:
    """``n`` synthetic passages (``benchmarks.bench_bm25.iter_corpus``) plus ``extra`` rows, as JSONL."""
    from benchmarks.bench_bm25 import iter_corpus

    with path.open("w") as f:
        for d in iter_corpus(n, seed=seed):
            f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
        for row in extra:
            f.write(json.dumps(row) + "\n")
    return path


def build(corpus: Path, out: Path) -> subprocess.CompletedProcess:
    return python("-m", "mempo_env.retrieval.index", "--corpus", str(corpus), "--out", str(out), "--workers", "1",
                  timeout=600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranked(retriever, queries: list[str]) -> list[list[str]]:
    return [[h.document.id for h in hits] for hits in retriever.search(queries, 3)]


QUERIES = ["river castle", "museum founded", "population of the city", "born in", "album released"]


def opened(folder: Path, **options) -> list[list[str]] | str:
    """The index's rankings of ``QUERIES``, or the one-line error it refuses to open with."""
    from mempo_env.retrieval.index import BM25Index, BM25IndexError

    try:
        return ranked(BM25Index(folder, **options), QUERIES)
    except (BM25IndexError, ValueError, OSError) as e:
        return f"{type(e).__name__}: {e}"


def serving(args: list[str], log: Path, **options):
    """``start_server`` (the retrieval server program on a free loopback port) with a short bound."""
    from mempo_env.retrieval.server import start_server

    return start_server(args, log, timeout=120, **options)


# --- the cases -----------------------------------------------------------------------------------------

def case_server(tmp: Path, trials: int) -> Iterator[Try]:
    """SIGKILL of a two-worker server's parent: its workers must go with it, the port must take a
    restart at once, and a client of two replicas must fail over to the live one."""
    from mempo_env.retrieval.remote import RemoteRetriever

    build(write_corpus(tmp / "c.jsonl", 3000), tmp / "idx")
    expected = opened(tmp / "idx")
    port = None
    for trial in range(trials):
        server = serving(["--index", str(tmp / "idx"), "--workers", "2"], tmp / "server.log", port=port or 0)
        port = int(server.url.rsplit(":", 1)[1])
        wait_until(lambda: len(children(server.proc.pid)) >= 2, 30)
        workers = children(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        if wait_until(lambda: not any(alive(w) for w in workers), 10):
            yield Try("server", "SIGKILL of the parent: workers exit", "correct")
        else:
            for w in workers:
                os.kill(w, signal.SIGKILL)
            yield Try("server", "SIGKILL of the parent: workers exit", "failed", f"{workers} still running")
    with serving(["--index", str(tmp / "idx")], tmp / "server.log", port=port) as again:
        answer = ranked(RemoteRetriever(again.url + "/retrieve"), QUERIES)
        yield Try("server", "restart on the freed port", "correct" if answer == expected else "silent")
    a = serving(["--index", str(tmp / "idx")], tmp / "a.log")
    with serving(["--index", str(tmp / "idx")], tmp / "b.log") as b:
        client = RemoteRetriever(f"{a.url}/retrieve,{b.url}/retrieve")
        ranked(client, QUERIES)
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        answer = [ranked(client, QUERIES) for _ in range(3)]
        yield Try("server", "SIGKILL of one replica: the client fails over",
                  "correct" if all(x == expected for x in answer) else "silent")


def leftovers(out: Path) -> list[str]:
    """What a build into ``out`` may leave beside or inside it besides the index itself."""
    return sorted(p.name for p in [*out.parent.iterdir(), *(out.iterdir() if out.is_dir() else ())]
                  if p.name.startswith(".tmp") or ".old" in p.name or ".tmp" in p.name)


def case_builder(tmp: Path, trials: int) -> Iterator[Try]:
    """SIGKILL of the index command while it replaces an index, at spread moments of a build: the
    folder must hold the old or the new index, complete; the next build must leave nothing behind; a
    reader opening the folder throughout a replacement must always find an index."""
    import threading

    old, new = write_corpus(tmp / "old.jsonl", 2000, seed=1), write_corpus(tmp / "new.jsonl", 20000, seed=2)
    out = tmp / "idx"
    start = time.monotonic()
    build(new, out)
    duration = time.monotonic() - start
    want_new = opened(out)
    build(old, out)
    want_old = opened(out)
    cmd = [sys.executable, "-m", "mempo_env.retrieval.index", "--corpus", str(new), "--out", str(out), "--workers", "1"]
    for i in range(trials):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(duration * (i + 0.5) / trials)
        proc.kill()
        proc.wait()
        found = opened(out)
        outcome = "correct" if found in (want_old, want_new) else "failed" if isinstance(found, str) else "silent"
        yield Try("builder", f"SIGKILL at {(i + 0.5) / trials:.0%} of a build", outcome,
                  found if isinstance(found, str) else "")
        if found == want_new:
            build(old, out)
    finished = build(new, out)
    left = leftovers(out)
    yield Try("builder", "the next build after the kills", "correct" if finished.returncode == 0 and not left and
              opened(out) == want_new else "failed", ", ".join(left))
    errors, done = [], threading.Event()

    def read() -> None:
        while not done.is_set():
            if isinstance(found := opened(out), str) or found not in (want_old, want_new):
                errors.append(found)

    reader = threading.Thread(target=read)
    reader.start()
    for corpus in (old, new, old):
        build(corpus, out)
    done.set()
    reader.join()
    yield Try("builder", "a reader opening the index throughout three replacements",
              "failed" if errors else "correct", str(errors[:1]))


def case_folders(tmp: Path) -> Iterator[Try]:
    """What the index command is pointed at: a folder of the user's, a file, a corpus that is not there
    or not a file. Each must be refused in one line, with nothing of the user's touched."""
    corpus = write_corpus(tmp / "c.jsonl", 200)
    user = tmp / "thesis"
    user.mkdir()
    (user / "thesis.tex").write_text("years of work")
    (tmp / "notes.txt").write_text("mine")
    for fault, out, source, kept in [
        ("--out: a folder of the user's", user, corpus, user / "thesis.tex"),
        ("--out: a file", tmp / "notes.txt", corpus, tmp / "notes.txt"),
        ("--corpus: no such file", tmp / "idx", tmp / "missing.jsonl", None),
        ("--corpus: a folder", tmp / "idx", user, user / "thesis.tex"),
    ]:
        proc = build(source, out)
        intact = kept is None or kept.exists()
        yield Try("folders", fault, "refused" if clear_refusal(proc) and intact else
                  "failed" if proc.returncode or not intact else "silent", last_line(proc.stderr))


def _damage_array(name: str, change: Callable) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        import numpy as np

        array = np.load(folder / name, mmap_mode="r+")
        change(array)
        array.flush()
    return damage


def _scramble(folder: Path) -> None:
    data = bytearray((folder / "vocab.bin").read_bytes())
    data.reverse()
    (folder / "vocab.bin").write_bytes(bytes(data))


def _meta(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "index.json"
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return damage


DAMAGES: dict[str, Callable[[Path], None]] = {
    "vocabulary bytes scrambled": _scramble,
    "postings zeroed": _damage_array("postings.npy", lambda a: a.fill(0)),
    "a negative posting": _damage_array("postings.npy", lambda a: a.__setitem__(0, -1)),
    "a posting past the last passage": _damage_array("postings.npy", lambda a: a.__setitem__(-1, 10**9)),
    "NaN weights": _damage_array("weights.npy", lambda a: a.__setitem__(slice(0, 50), float("nan"))),
    "index.json: a JSON list": _meta(lambda meta: list(meta)),
    "index.json: a key missing": _meta(lambda meta: {k: v for k, v in meta.items() if k != "num_docs"}),
    "postings truncated": lambda folder: os.truncate(folder / "postings.npy", 200),
    "a negative passage offset": _damage_array("offsets.npy", lambda a: a.__setitem__(1, -5)),
}


def case_damage(tmp: Path) -> Iterator[Try]:
    """Each damage on a copy of a good index, served with ``--verify``: refused at start, or served
    with the good index's rankings. The ``detail`` says whether the cheap checks of a plain open
    caught it too."""
    import shutil

    from mempo_env.retrieval.remote import RemoteRetriever

    build(write_corpus(tmp / "c.jsonl", 3000), tmp / "good")
    good = opened(tmp / "good")
    for fault, damage in DAMAGES.items():
        folder = tmp / fault.replace(" ", "-").replace(":", "").replace(".", "")
        shutil.copytree(tmp / "good", folder)
        damage(folder)
        at_open = "refused at plain open" if isinstance(opened(folder), str) else "opens without --verify"
        try:
            with serving(["--index", str(folder), "--verify"], folder.with_suffix(".log")) as server:
                answer = ranked(RemoteRetriever(server.url + "/retrieve"), QUERIES)
                yield Try("damage", fault, "correct" if answer == good else "silent", at_open)
        except RuntimeError as e:  # the server ended (its log's tail is in the message) or never answered
            refused = "ended with exit code" in str(e) and "Traceback" not in str(e)
            yield Try("damage", fault, "refused" if refused else "failed", at_open)


def case_replicas(tmp: Path) -> Iterator[Try]:
    """Two replicas that serve different corpora behind one client: refused, naming both URLs."""
    from mempo_env.retrieval.remote import RemoteRetriever, RetrieverError

    build(write_corpus(tmp / "a.jsonl", 1000, seed=1), tmp / "a")
    build(write_corpus(tmp / "b.jsonl", 1000, seed=2), tmp / "b")
    with serving(["--index", str(tmp / "a")], tmp / "a.log") as a, \
            serving(["--index", str(tmp / "b")], tmp / "b.log") as b:
        for order in ((a, b), (b, a)):
            urls = [f"{s.url}/retrieve" for s in order]
            try:
                ranked(RemoteRetriever(",".join(urls)), QUERIES * 4)
                yield Try("replicas", "replicas of two corpora", "silent")
            except RetrieverError as e:
                named = all(url in str(e) for url in urls)
                yield Try("replicas", "replicas of two corpora", "refused" if named else "failed", str(e)[:200])


def exchange(url: str, raw: bytes, seconds: float) -> tuple[int | None, bytes]:
    """Send ``raw`` to the server at ``url`` and read until it answers and closes, or ``seconds``
    pass: (the HTTP status or None, what came back)."""
    host, port = url.removeprefix("http://").split(":")
    reply = b""
    with socket.create_connection((host, int(port)), timeout=seconds) as s:
        s.sendall(raw)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and b"\r\n\r\n" not in reply:
                if not (chunk := s.recv(65536)):
                    break
                reply += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    status = reply.split(b" ", 2)[1] if reply.startswith(b"HTTP/") else None
    return (int(status) if status else None), reply


def post(body: bytes, headers: str) -> bytes:
    return f"POST /retrieve HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


HOSTILE = {
    "Content-Length: -1": post(b'{"queries": ["x"]}', "Content-Length: -1\r\n"),
    "no Content-Length": post(b'{"queries": ["x"]}', ""),
    "a body shorter than declared": post(b'{"queries": ', "Content-Length: 100\r\n"),
    "two Content-Lengths": post(b'{"queries": ["x"]}', "Content-Length: 18\r\nContent-Length: 2\r\n"),
    "JSON nested 100,000 deep": post(b"[" * 100_000, "Content-Length: 100000\r\n"),
    "a body that is not UTF-8": post(b'{"queries": ["\xff\xfe"]}', "Content-Length: 19\r\n"),
    "queries that are not strings": post(b'{"queries": [1, null]}', "Content-Length: 22\r\n"),
    "topk -5": post(b'{"queries": ["x"], "topk": -5}', "Content-Length: 30\r\n"),
}


def case_requests(tmp: Path) -> Iterator[Try]:
    """Hostile requests against a server with a 2-second silence timeout: each answered with a 4xx
    within the bound (a request that holds a handler past it failed). Then a passage holding a lone
    surrogate, searched through the server: answered 200, with the in-process index's text."""
    from mempo_env.retrieval.index import BM25Index
    from mempo_env.retrieval.remote import RemoteRetriever

    odd = {"id": "odd", "title": "Surrogate", "text": "zebrafinch \udc80 quokka"}
    build(write_corpus(tmp / "c.jsonl", 500, extra=[odd]), tmp / "idx")
    with serving(["--index", str(tmp / "idx"), "--timeout", "2"], tmp / "server.log") as server:
        for fault, raw in HOSTILE.items():
            status, reply = exchange(server.url, raw, seconds=10)
            outcome = "refused" if status and 400 <= status < 500 else "silent" if status == 200 else "failed"
            yield Try("requests", fault, outcome, reply.split(b"\r\n", 1)[0].decode(errors="replace"))
        local = [h.document.text for h in BM25Index(tmp / "idx").search(["zebrafinch quokka"], 1)[0]]
        try:
            hits = RemoteRetriever(server.url + "/retrieve").search(["zebrafinch quokka"], 1)[0]
            remote = [h.document.text for h in hits]
            yield Try("requests", "a passage with a lone surrogate", "correct" if remote == local else "silent")
        except Exception as e:  # noqa: BLE001 - any failure here is the defect
            yield Try("requests", "a passage with a lone surrogate", "failed", repr(e)[:200])
        still = ranked(RemoteRetriever(server.url + "/retrieve"), QUERIES) == opened(tmp / "idx")
        yield Try("requests", "a plain search after them all", "correct" if still else "silent")


TINY = ["--questions-per-step=2", "--group-size=2", "--max-turns=4", "--max-new-tokens=24", "--minibatch-size=8",
        "--pack-tokens=256", "--eval-episodes=0", "--eval-every=0", "--checkpoint-every=1"]


def learner(run: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "algorithms.mempo", "--run-dir", str(run), *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen, seconds: float = 600) -> subprocess.CompletedProcess:
    _, err = proc.communicate(timeout=seconds)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


def history(run: Path) -> list[dict]:
    """The metrics of a run without its clock readings (``*_s``), which no two runs share."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.endswith("_s")} for line in lines]


def holder(run: Path) -> int | None:
    """The pid that holds ``run`` (the lock file of ``hold_folder``), if any wrote one."""
    from agents.episode_log import LOCK

    try:
        return int((run / LOCK).read_text().strip())
    except (OSError, ValueError):
        return None


def checkpoint_step(run: Path) -> int:
    try:
        return json.loads((run / "checkpoint" / "step.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


def case_learner(tmp: Path, trials: int) -> Iterator[Try]:
    """SIGKILL of ``algorithms.mempo`` after its n-th checkpoint, then ``--resume``: the metrics must
    equal an uninterrupted run's. Then the run folder's faults: a checkpoint without its step, a second
    learner on a held folder, a truncated config.json, a damaged checkpoint: each refused in one line,
    the metrics untouched."""
    from algorithms.sft import SFTConfig, ensure_warmup

    policy = str(ensure_warmup(SFTConfig(cache_dir=str(tmp / "cache"), episodes=20, steps=3, batch_size=8)))
    steps = trials + 1
    base = ["--policy", policy, "--steps", str(steps), *TINY]
    if finished(learner(tmp / "whole", *base)).returncode:
        yield Try("learner", "an uninterrupted run", "failed")
        return
    whole = history(tmp / "whole")
    for k in range(1, trials + 1):
        run = tmp / f"killed-{k}"
        proc = learner(run, *base)
        wait_until(lambda: checkpoint_step(run) >= k or proc.poll() is not None, 600)
        proc.kill()
        proc.wait()
        resumed = finished(learner(run, "--resume", str(run)))
        outcome = "failed" if resumed.returncode else "correct" if history(run) == whole else "silent"
        yield Try("learner", f"SIGKILL after checkpoint {k}, then --resume", outcome, last_line(resumed.stderr))

    def refused_keeping(fault: str, run: Path, proc: subprocess.CompletedProcess, names: str = "") -> Try:
        kept = history(run) == whole
        ok = clear_refusal(proc) and kept and names in proc.stderr
        return Try("learner", fault, "refused" if ok else "silent" if proc.returncode == 0 else "failed",
                   last_line(proc.stderr))

    import shutil

    run = tmp / "no-step"
    shutil.copytree(tmp / "whole", run)
    (run / "checkpoint" / "step.json").unlink()
    yield refused_keeping("checkpoint/step.json missing", run, finished(learner(run, "--resume", str(run), "--steps",
                                                                              str(steps + 1))))
    run = tmp / "held"
    shutil.copytree(tmp / "whole", run)
    first = learner(run, "--resume", str(run), "--steps", str(steps + 2))
    wait_until(lambda: holder(run) == first.pid or first.poll() is not None, 120)
    second = finished(learner(run, "--resume", str(run), "--steps", str(steps + 2)), 120)
    first_done = finished(first)
    lines = history(run)
    ok = clear_refusal(second) and first_done.returncode == 0 and [m["step"] for m in lines] == list(
        range(1, steps + 3))
    yield Try("learner", "a second learner on a held run folder", "refused" if ok else
              "failed" if second.returncode else "silent", last_line(second.stderr))
    run = tmp / "config"
    shutil.copytree(tmp / "whole", run)
    config = run / "config.json"
    config.write_text(config.read_text()[:40])
    yield refused_keeping("config.json truncated", run, finished(learner(run, "--resume", str(run))), "config.json")
    run = tmp / "damaged"
    shutil.copytree(tmp / "whole", run)
    (run / "checkpoint" / "model.safetensors").write_bytes(b"not a tensor file")
    yield refused_keeping("checkpoint weights damaged", run, finished(learner(run, "--resume", str(run), "--steps",
                                                                              str(steps + 1))))


CASES = {
    "server": lambda tmp, n: case_server(tmp, n),
    "builder": lambda tmp, n: case_builder(tmp, n),
    "folders": lambda tmp, n: case_folders(tmp),
    "damage": lambda tmp, n: case_damage(tmp),
    "replicas": lambda tmp, n: case_replicas(tmp),
    "requests": lambda tmp, n: case_requests(tmp),
    "learner": lambda tmp, n: case_learner(tmp, n),
}


def run_cases(names: list[str], trials: int) -> list[Try]:
    """Every try of the named cases, each case in a fresh temporary folder removed afterwards. A case
    that raises ends with one ``failed`` try saying what it raised."""
    tries = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"reliability-{name}-") as tmp:
            try:
                for attempt in CASES[name](Path(tmp), trials):
                    print(f"{attempt.case:9} {attempt.outcome:8} {attempt.fault}", file=sys.stderr, flush=True)
                    tries.append(attempt)
            except Exception as e:  # noqa: BLE001 - the benchmark reports a crash as a failed try
                tries.append(Try(name, "the case itself", "failed", f"{type(e).__name__}: {e}"[:300]))
    return tries


def table(tries: list[Try]) -> str:
    from agents.statistics import table_head

    rows = table_head(["case", "tried", *OUTCOMES], align="l" + "r" * (len(OUTCOMES) + 1))
    for case in dict.fromkeys(t.case for t in tries):
        counts = [sum(t.case == case and t.outcome == o for t in tries) for o in OUTCOMES]
        rows.append(f"| {case} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
    totals = [sum(t.outcome == o for t in tries) for o in OUTCOMES]
    rows.append(f"| **all** | {len(tries)} | " + " | ".join(map(str, totals)) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--trials", type=int, default=3, help="kills a kill case makes (default 3)")
    parser.add_argument("--out", help="also write every try as JSON here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    if unknown := [n for n in names if n not in CASES]:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    tries = run_cases(names, args.trials)
    print(table(tries))
    for t in tries:
        if t.outcome in ("silent", "failed"):
            print(f"- {t.case}: {t.fault}: {t.outcome} {t.detail}")
    if args.out:
        from agents.episode_log import write_atomic

        write_atomic(Path(args.out), json.dumps([t.__dict__ for t in tries], indent=1))
    raise SystemExit(1 if any(t.outcome in ("silent", "failed") for t in tries) else 0)


if __name__ == "__main__":
    main()
