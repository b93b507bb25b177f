"""The environment under concurrency: episodes per second, lost episodes and memory per session of
``gym.make_vec(..., vectorization_mode="async")`` and of the OpenEnv server, over one shared index.

    python -m benchmarks.experiments.retrieval_scale.concurrency --index runs/scale/index-1000000 \\
        --queries runs/scale/queries-1000000.json

Every session plays ``--episodes`` timed episodes after a first one (which imports and maps what
searching needs; it counts as played or lost, not in the time). They are the same scripted episode,
so the cost is the environment's and the retriever's, not an agent's: two searches (queries from
``--queries``, the scale benchmark's, which match the synthetic corpus) and an answer, each a
well-formed turn, on the generated task's questions, with ``retriever=INDEX``
(``mempo_env.retrieval.index``, memory-mapped by every process that opens it).

- **async**: one ``gym.make_vec`` of N sub-processes (Gymnasium's defaults: shared memory, next-step
  autoreset), stepped in lockstep; every episode is four steps (three turns and the autoreset).
- **openenv**: ``python -m integrations.openenv_server --max-sessions N`` in its own process, N threads
  each with its own OpenEnv client (its WebSocket session) playing episodes at once.

An episode counts as played when its last step ends it with the final ``info`` (its ``score``); any
other end is lost. Memory is the proportional set size (PSS, ``/proc/PID/smaps_rollup``), which
splits pages shared through the page cache (the index) or copy-on-write among the processes that
map them: for async, the workers' sum over N; for openenv, the server's growth from idle to N
open sessions, over N. Results go to ``OUT/concurrency.json``; a table is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.extras import runnable

SESSIONS = (16, 64, 256)
PATHS = ("async", "openenv")
STEPS_PER_EPISODE = 3  # search, search, answer


def actions(queries: list[str], episode: int) -> list[str]:
    """The scripted episode ``episode``: two searches then an answer, each a well-formed turn."""
    from agents.scripted import turn

    first, second = (queries[(2 * episode + j) % len(queries)] for j in range(2))
    return [turn("searching", "look it up", "search", first), turn(f"found {first}", "once more", "search", second),
            turn(f"found {first} and {second}", "answering", "answer", "unknown")]


def pss_mb(pid: int) -> float:
    """The process's proportional set size in MB (0 once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def available_mb() -> float:
    """The machine's available memory in MB (``MemAvailable``): a level that would not fit is skipped,
    with its reason, rather than run into the OOM killer."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def run_async(n: int, episodes: int, env_kwargs: dict[str, Any], queries: list[str]) -> dict[str, Any]:
    import gymnasium as gym
    import numpy as np

    import mempo_env  # noqa: F401  (registers MemSearchQA-v0)

    started = time.perf_counter()
    envs = gym.make_vec("MemSearchQA-v0", num_envs=n, vectorization_mode="async", **env_kwargs)
    try:
        envs.reset(seed=0)
        ready_s = time.perf_counter() - started
        played = lost = 0
        for e in range(episodes + 1):
            if e:
                envs.step(("",) * n)  # the autoreset step: every slot ended together
            else:
                first_s = time.perf_counter()
            script = [actions(queries, e * n + i) for i in range(n)]
            for k in range(STEPS_PER_EPISODE):
                _, _, terminated, truncated, infos = envs.step(tuple(s[k] for s in script))
            ended = terminated & ~truncated & infos.get("_score", np.zeros(n, dtype=bool))
            played += int(ended.sum())
            lost += n - int(ended.sum())
            if not e:
                t = time.perf_counter()
                first_s = t - first_s
        wall = time.perf_counter() - t
        memory = sum(pss_mb(p.pid) for p in envs.unwrapped.processes) / n
    finally:
        envs.close()
    return {"sessions": n, "episodes": played + lost, "played": played, "lost": lost, "wall_s": wall,
            "episodes_per_s": n * episodes / wall, "ready_s": ready_s, "first_episode_s": first_s,
            "pss_mb_per_session": memory}


def run_openenv(n: int, episodes: int, env_args: list[str], queries: list[str]) -> dict[str, Any]:
    from integrations.openenv_server import MemSearchQAAction, MemSearchQAClient

    with socket.socket() as sock:  # a free port (the server's CLI does not report one it picked)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "integrations.openenv_server", "--port", str(port), "--max-sessions",
                             str(n), *env_args], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        if not any("Uvicorn running on" in line for line in proc.stderr):
            raise RuntimeError("the OpenEnv server did not start")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
        idle = pss_mb(proc.pid)
        counts = {"played": 0, "lost": 0, "errors": []}
        lock, opened = threading.Lock(), threading.Barrier(n + 1)

        def session(i: int) -> None:
            try:
                with MemSearchQAClient(base_url=url).sync() as client:
                    for e in range(episodes + 1):
                        if e == 1:  # after a first episode, which imports and maps what searches need
                            opened.wait()
                            opened.wait()  # the memory is read between the two
                        client.reset(seed=i + e * n)
                        for text in actions(queries, e * n + i):
                            obs = client.step(MemSearchQAAction(text=text)).observation
                        ok = obs.done and not obs.truncated and "score" in (obs.metadata or {})
                        with lock:
                            counts["played" if ok else "lost"] += 1
            except Exception as e:  # counted: a session that fails loses its episodes, loudly
                with lock:
                    counts["errors"].append(repr(e))
                opened.abort()

        threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
        for th in threads:
            th.start()
        with contextlib.suppress(threading.BrokenBarrierError):  # a failed session: its errors are counted
            opened.wait(timeout=300)
        ready_s, memory = time.perf_counter() - started, (pss_mb(proc.pid) - idle) / n
        t = time.perf_counter()
        with contextlib.suppress(threading.BrokenBarrierError):
            opened.wait(timeout=300)
        for th in threads:
            th.join()
        wall = time.perf_counter() - t
    finally:
        proc.terminate()
        proc.wait(30)
    lost = n * (episodes + 1) - counts["played"]
    return {"sessions": n, "episodes": n * (episodes + 1), "played": counts["played"], "lost": lost,
            "errors": counts["errors"][:5], "wall_s": wall, "episodes_per_s": n * episodes / wall,
            "ready_s": ready_s, "pss_mb_per_session": memory, "server_idle_pss_mb": idle}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.retrieval_scale.concurrency",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="an index folder (python -m mempo_env.retrieval.index)")
    parser.add_argument("--queries", required=True, help="a JSON list of queries that match its corpus")
    parser.add_argument("--sessions", default=",".join(map(str, SESSIONS)), help="concurrent sessions, comma-separated")
    parser.add_argument("--episodes", type=int, default=3, help="episodes each session plays")
    parser.add_argument("--paths", default=None,
                        help="comma-separated, of async, openenv (default: both, openenv if its extra is installed)")
    parser.add_argument("--out", default="runs/concurrency", help="folder for concurrency.json")
    args = parser.parse_args(argv)
    requested = args.paths.split(",") if args.paths else None
    if unknown := set(requested or ()) - set(PATHS):
        parser.error(f"unknown paths {sorted(unknown)}: choose from {', '.join(PATHS)}")
    paths = runnable(parser, requested, PATHS, {"openenv": "openenv"})
    queries = json.loads(Path(args.queries).read_text())
    env_kwargs = {"retriever": str(Path(args.index).resolve()), "max_turns": 6}
    env_args = [a for key, value in env_kwargs.items() for a in (f"--{key.replace('_', '-')}", str(value))]
    rows = []
    for path in paths:
        for n in map(int, args.sessions.split(",")):
            measured = [r for r in rows if r["path"] == path and "skipped" not in r]
            if measured and (need := 1.25 * n * measured[-1]["pss_mb_per_session"]) > available_mb():
                rows.append({"path": path, "sessions": n, "skipped": f"{n} sessions at the {measured[-1]['sessions']}"
                             f"-session PSS need about {need / 1024:.1f} GB; {available_mb() / 1024:.1f} GB available"})
                print(f"{path} x{n}: skipped, {rows[-1]['skipped']}", file=sys.stderr, flush=True)
                continue
            row = (run_async(n, args.episodes, env_kwargs, queries) if path == "async"
                   else run_openenv(n, args.episodes, env_args, queries))
            rows.append({"path": path, **row})
            print(f"{path} x{n}: {row['episodes_per_s']:.1f} episodes/s, {row['lost']} lost, "
                  f"{row['pss_mb_per_session']:.1f} MB a session", file=sys.stderr, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "concurrency.json").write_text(json.dumps({"index": args.index, "episodes": args.episodes, "rows": rows},
                                                     indent=1))
    from agents.statistics import table_head

    print(*table_head(["path", "sessions", "episodes played", "lost", "episodes/s", "searches/s",
                       "MB a session (PSS)"], align="lrrrrrr"), sep="\n")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['path']} | {r['sessions']} | skipped: {r['skipped']} | | | | |")
            continue
        print(f"| {r['path']} | {r['sessions']} | {r['played']} | {r['lost']} | {r['episodes_per_s']:.1f} | "
              f"{2 * r['episodes_per_s']:.0f} | {r['pss_mb_per_session']:.1f} |")


if __name__ == "__main__":
    main()
