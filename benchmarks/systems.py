"""Systems micro-benchmarks, each a ratio to a baseline measured in the same run.

    python -m benchmarks.systems                       # every suite, then the ratio table
    python -m benchmarks.systems --only env,bm25       # some suites
    python -m benchmarks.systems -- --benchmark-max-time=0.1   # extra pytest arguments after --

Suites (pytest-benchmark files under ``benchmarks/``, outside the default test run):

- ``env``: ``env.step`` of MemSearchQA-v0 vs a no-op Gymnasium ``step`` (about 15 s);
- ``bm25``: the BM25 search tool (bm25s) vs rank-bm25, query and index build (about 2 min);
- ``train``: the memory-reward forward pass and the weight sync as shares of a MemPO training step
  on the warmed-up tiny policy (about 2 min; the warm-up is built first if ``runs/cache`` lacks it);
- ``engines``: HF vs vLLM rollout tokens/s and weight-sync time, from ``benchmarks/bench_engines.py``
  where that file exists and vllm is installed.

The suites run in one pytest process writing ``--benchmark-json``; the table is built from it and
written with it to ``--out``. A benchmark names its row in ``benchmark.extra_info``: ``label``,
``vs`` (the label of its baseline), ``items`` (work items per timed call: time is divided by it),
``share`` (show the ratio as a percentage of the baseline). A benchmark that times several parts of
one run lists them in ``extra_info["parts"]`` as ``{label, seconds, vs, share}``. Times are
medians per call; on a shared machine expect ±15-20% between runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SUITES = {"env": "bench_env.py", "bm25": "bench_bm25.py", "train": "bench_train.py", "engines": "bench_engines.py"}


def unavailable(suite: str) -> str | None:
    """Why a suite cannot run here, or None."""
    if not (HERE / SUITES[suite]).is_file():
        return f"benchmarks/{SUITES[suite]} does not exist yet"
    if suite == "engines" and importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install -e '.[vllm]' on a GPU machine)"
    if suite == "train" and importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install -e '.[train]')"
    return None


def measurements(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Label -> {seconds, vs, share} from a pytest-benchmark JSON report (see the module doc)."""
    found: dict[str, dict[str, Any]] = {}
    for bench in report["benchmarks"]:
        info = bench.get("extra_info", {})
        if "label" in info:
            seconds = bench["stats"]["median"] / info.get("items", 1)
            found[info["label"]] = {"seconds": seconds, "vs": info.get("vs"), "share": info.get("share", False)}
        for part in info.get("parts", []):
            found[part["label"]] = {"seconds": part["seconds"], "vs": part.get("vs"), "share": part.get("share", False)}
    return found


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _ratio(ratio: float, share: bool) -> str:
    if share:
        return f"{100 * ratio:.3g}% of it" if ratio >= 1e-4 else "<0.01% of it"
    if ratio >= 1:
        return f"{ratio:.3g}× (slower)"
    return f"{ratio:.2g}× ({1 / ratio:.3g}× faster)"


def ratio_table(found: dict[str, dict[str, Any]]) -> str:
    """One markdown row per measurement with a baseline: both times and their ratio."""
    from agents.statistics import table_head

    lines = table_head(["measured", "time", "baseline (same run)", "baseline time", "measured / baseline"])
    for label, m in found.items():
        if m["vs"] is None:
            continue
        base = found.get(m["vs"])
        if base is None:
            lines.append(f"| {label} | {_time(m['seconds'])} | {m['vs']} | not measured | |")
            continue
        lines.append(f"| {label} | {_time(m['seconds'])} | {m['vs']} | {_time(base['seconds'])} | "
                     f"{_ratio(m['seconds'] / base['seconds'], m['share'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m benchmarks.systems", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(SUITES), help=f"comma-separated suites: {', '.join(SUITES)}")
    p.add_argument("--out", default="runs/systems", help="folder for benchmark.json and table.md")
    args = p.parse_args(argv)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SUITES]
    if unknown or not wanted:
        p.error(f"--only: unknown suite(s) {unknown}; known: {', '.join(SUITES)}")
    skipped = {s: why for s in wanted if (why := unavailable(s))}
    for suite, why in skipped.items():
        print(f"skipping {suite}: {why}")
    suites = [s for s in wanted if s not in skipped]
    if not suites:
        p.error("nothing to run")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "benchmark.json"
    cmd = [sys.executable, "-m", "pytest", *(str(HERE / SUITES[s]) for s in suites), "-p", "no:cacheprovider",
           f"--benchmark-json={json_path}", *extra]
    print(" ".join(cmd[1:]), flush=True)
    json_path.unlink(missing_ok=True)
    code = subprocess.run(cmd, cwd=HERE.parent).returncode
    if not json_path.is_file():
        sys.exit(f"pytest wrote no {json_path} (exit code {code})")
    table = ratio_table(measurements(json.loads(json_path.read_text())))
    notes = "".join(f"\nNot run: {s} ({why})." for s, why in skipped.items())
    if code != 0:
        notes += f"\nSome benchmarks failed (pytest exit code {code}); their rows are missing."
    (out / "table.md").write_text(table + "\n" + notes)
    print("\n" + table + notes)
    if code != 0:
        sys.exit(code)
    return table


if __name__ == "__main__":
    main()
