"""Documents that run: every fenced code block and every inline ``python -m`` command of README.md,
docs/**/*.md (the experiments' records included) and benchmarks/RESULTS.md is run here, or at least
parsed and validated, or run by the test its ``<!-- tested by FILE::TEST -->`` marker names (which
must exist). A block or command nobody accounts for fails ``test_every_block_is_accounted_for``,
naming it: a doc edit cannot slip untested code in.

How each is checked (``test_the_document_runs``, one document at a time, in the document's order, in
a fresh folder holding links to the repository's top-level entries, so relative paths resolve and
outputs stay out of the repository):

- A ``python`` block is run, or only compiled where ``PYTHON`` says why; blocks under one heading
  share one namespace (a reader runs them in one session). ``PYTHON`` names every block and the
  reductions applied to long ones (text replaced before running, stated there).
- A ``bash`` block or inline command is split into commands (``doc_blocks.shell_commands``: loops
  expanded, variables substituted) and each goes to its rule in ``COMMANDS`` or ``MODULES``: a
  project program is run when it is cheap and self-contained here, at a reduced size (each rule
  states it: ``benchmarks.run`` with ``--episodes 2``), and otherwise parsed by its own parser
  (argparse or tyro, stopped right after parsing: no ``--help``, nothing run) with the reason it
  is not run; pip commands go through pip's own parser and their extras must exist in
  pyproject.toml; scripts must exist and pass ``bash -n``; ``python -c`` code must compile.
- Inline usage notation (``[--out DIR]``, ``RUN_DIR...``) is read as the command it describes.
- A ``text`` block is not code. Any other language fails.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import DOCUMENTS, ROOT, Block, code_blocks, inline_commands, python_module_args, shell_commands

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

BLOCKS = code_blocks()
INLINE = inline_commands()
LANGUAGES = ("python", "bash", "text")
SCRIPTED = ("oracle", "weak", "random")


# ---- python blocks ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """Run the block, after replacing each ``old`` by ``new`` (a reduction of a long documented run)."""

    reductions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Compile:
    """Compile the block only, because ``why``."""

    why: str


# (document, a line that is in exactly one of its python blocks) -> how that block is checked.
PYTHON: dict[tuple[str, str], Run | Compile] = {
    ("README.md", 'env = gym.make("MemSearchQA-v0")'): Run(),
    ("README.md", 'agent = make_agent("oracle")'): Run(),
    ("docs/environment.md", "check_trajectory([turn1, turn2]).failed"): Run(),
    ("docs/environment.md", 'dataset="my_questions.parquet"'): Compile(
        "a shared set from ../shared/data and the reader's own question and corpus files"),
    ("benchmarks/RESULTS.md", 'evaluate({"warm-up": "hf:algorithms/warmup#max_new_tokens=256"}'): Run((
        ("episodes=100", "episodes=2"),  # 2 episodes per horizon instead of 100 (2 min)
        ("objectives=[1, 2, 4, 6, 8, 10]", "objectives=[1, 2]"))),
    ("benchmarks/RESULTS.md", "from benchmarks.replay import replay"): Run(),  # on the reduced run above
    ("docs/experiments/pfull-warm-up.md", '"pfull-variant": "hf:FOLDER#max_new_tokens=256"'): Compile(
        "FOLDER is the reader's fine-tuned policy (the block above builds it in 33 min)"),
}


def python_rule(block: Block) -> Run | Compile | None:
    found = [rule for (file, line), rule in PYTHON.items() if file == block.file and line in block.text]
    return found[0] if len(found) == 1 else None


# ---- commands ----------------------------------------------------------------------------------------
class _Parsed(BaseException):  # not an Exception: a program's own ``except Exception`` must not catch it
    def __init__(self, options: Any) -> None:
        self.options = options


def own_parser(main: Callable[[], Any], *, tyro_cli: bool = False) -> Any:
    """The options a program's ``main`` parses, stopping it right after its parser (argparse's
    ``parse_args`` or ``tyro.cli``) returns; a rejected option fails with the parser's own message."""
    if tyro_cli:
        import tyro

        target, name = tyro, "cli"
    else:
        target, name = argparse.ArgumentParser, "parse_args"
    original = getattr(target, name)

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise _Parsed(original(*args, **kwargs))

    stderr = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(stderr):
        mp.setattr(target, name, stop)
        try:
            main()
        except _Parsed as parsed:
            return parsed.options
        except SystemExit:
            raise AssertionError(f"its own parser rejects it: {stderr.getvalue().strip()[-800:]}") from None
    raise AssertionError("the program returned without calling its parser")


def run_main(main: Callable[[], Any]) -> None:
    """Run a program's ``main``; exiting 0 is success, another exit fails with what it wrote."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise AssertionError(f"exited {e.code}: {stderr.getvalue().strip()[-800:]}") from None


def with_option(args: list[str], option: str, value: str) -> list[str]:
    """``args`` with ``option`` set to ``value`` (replaced where given, else added)."""
    if option in args:
        i = args.index(option)
        return [*args[: i + 1], value, *args[i + 2:]]
    return [*args, option, value]


def _shared_data_here() -> bool:
    from mempo_env.tasks.loaders import data_dir

    return data_dir().is_dir()


def benchmarks_run(args: list[str], cwd: Path) -> str:
    """Run with ``--episodes 2`` when every agent is scripted and all it reads is here; else parse."""
    from benchmarks import run
    from mempo_env.tasks.loaders import SHARED_SETS

    options = own_parser(lambda: run.main(args))
    specs = run.label_agents([s for s in options.agents.split(",") if s.strip()]).values()
    dataset = options.dataset
    why = ("uses a shell variable a command sets that is not run here" if any("$" in a for a in args) else
           "a model agent (model files, minutes to hours)" if any(re.split("[:#]", s)[0] not in SCRIPTED
                                                                  for s in specs) else
           "a retrieval server" if options.retriever else
           "needs ../shared/data" if dataset in SHARED_SETS and not _shared_data_here() else
           "the reader's own dataset file" if dataset not in (None, "generated", *SHARED_SETS)
           and not (cwd / dataset).exists() else
           f"tokenizer {options.tokenizer} is made by a command not run here"
           if options.tokenizer and not (cwd / options.tokenizer).exists() else
           f"replay log {options.replay_retrieval} is not here"
           if options.replay_retrieval and not (cwd / options.replay_retrieval).exists() else "")
    if why:
        return f"parsed ({why})"
    run_main(lambda: run.main(with_option(args, "--episodes", "2")))
    return "ran with --episodes 2"


def benchmarks_report(args: list[str], cwd: Path) -> str:
    from benchmarks import report

    options = own_parser(lambda: report.main(args))
    if not all((cwd / d).is_dir() for d in options.runs):
        return "parsed (its run folders are made by commands not run here)"
    run_main(lambda: report.main(args))
    return "ran"


def benchmarks_soak(args: list[str], cwd: Path) -> str:
    from benchmarks.experiments import soak

    own_parser(lambda: soak.main(args))
    run_main(lambda: soak.main(with_option(args, "--actions", "20")))
    return "ran with --actions 20"


def benchmarks_index_verify(args: list[str], cwd: Path) -> str:
    from benchmarks.experiments.retrieval_scale import index_verify

    own_parser(lambda: index_verify.main(args))
    reduced = with_option(with_option(with_option(args, "--sizes", "2000"), "--rounds", "1"), "--out", str(cwd / "iv"))
    run_main(lambda: index_verify.main(reduced))
    return "ran with --sizes 2000 --rounds 1"


def parse_only(module: str, why: str, call: Callable[[Any, list[str]], Any], tyro_cli: bool = False,
               extra: str | None = None) -> Callable[[list[str], Path], str]:
    """A rule that parses a program's arguments with its own parser and says why it is not run; skipped
    where the program's ``extra`` (a module it imports) is not installed."""
    def check(args: list[str], cwd: Path) -> str:
        for needed in ("tyro",) * tyro_cli + ((extra,) if extra else ()):
            pytest.importorskip(needed)
        own_parser(lambda: call(importlib.import_module(module), args), tyro_cli=tyro_cli)
        return f"parsed ({why})"

    return check


def algorithms_sft(args: list[str], cwd: Path) -> str:
    """``algorithms/sft.py``'s ``__main__`` reads no options and ``--ship`` itself (building the default
    warm-up, hours without a GPU) and gives any others to ``tyro.cli(SFTConfig)``."""
    if args in ([], ["--ship"]):
        return "builds the default warm-up (hours on a CPU): no options to parse"
    tyro = pytest.importorskip("tyro")
    from algorithms.sft import SFTConfig

    own_parser(lambda: tyro.cli(SFTConfig, args=args), tyro_cli=True)
    return "parsed (training: minutes to hours)"


def vllm_api_server(args: list[str], cwd: Path) -> str:
    """vLLM's server takes a model and 20 s to import its parser: its documented options must be those
    ``tests/test_vllm_server.py`` starts it with (where vLLM's own parser reads them, in CI)."""
    started = (ROOT / "tests" / "test_vllm_server.py").read_text()
    missing = [a for a in args if a not in PLACEHOLDERS.values() and f'"{a}"' not in started]
    assert not missing, f"tests/test_vllm_server.py does not start the server with {missing}"
    return "its options are those tests/test_vllm_server.py starts the server with"


def python_m_pytest(args: list[str], cwd: Path) -> str:
    valued = ("-m", "-k", "-p", "-c", "--durations")  # options whose value is the next word, not a path
    paths = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in valued)]
    missing = [p for p in paths if not (ROOT / p.split("::")[0]).exists()]
    assert not missing, f"no such test path: {missing}"
    return "its test paths exist (the suite runs it)"


TRAINING = "training: minutes to hours (tests/test_training.py trains a step of each)"
# python -m MODULE -> rule(args, folder) returning what it did; see the module docstring.
MODULES: dict[str, Callable[[list[str], Path], str]] = {
    "benchmarks.run": benchmarks_run,
    "benchmarks.report": benchmarks_report,
    "benchmarks.experiments.soak": benchmarks_soak,
    "benchmarks.experiments.retrieval_scale.index_verify": benchmarks_index_verify,
    "benchmarks.experiments.reliability": parse_only(
        "benchmarks.experiments.reliability", "about 25 minutes of real processes, kills and training on 2 cores; "
        "tests/test_reliability.py runs every case", lambda m, a: m.main(a)),
    "benchmarks.experiments.learner_comparison": parse_only(
        "benchmarks.experiments.learner_comparison.comparison", "about 2 hours on 2 cores; tests/test_learners.py runs "
        "it at tiny settings", lambda m, a: m.main(a)),
    "benchmarks.experiments.context_strategies": parse_only(
        "benchmarks.experiments.context_strategies", "about 1 hour on 2 cores; tests/test_strategies.py "
        "runs it at tiny settings", lambda m, a: m.main(a)),
    "benchmarks.bench_step": parse_only("benchmarks.bench_step", "about 10 minutes of training steps on 2 cores",
                                        lambda m, a: m.main(a)),
    "benchmarks.systems": parse_only("benchmarks.systems", "minutes of micro-benchmarks; tests/test_systems.py runs "
                                     "the env suite", lambda m, a: m.main(a)),
    "mempo_env.retrieval.server": parse_only("mempo_env.retrieval.server", "a server that runs until stopped; "
                                             "tests/test_retrieval.py serves through it", lambda m, a: m.main(a)),
    "mempo_env.retrieval.index": parse_only("mempo_env.retrieval.index", "minutes to hours of indexing; "
                                            "tests/test_index.py builds through it", lambda m, a: m.main(a)),
    "benchmarks.experiments.memory_signal": parse_only(
        "benchmarks.experiments.memory_signal", "about 10 minutes of rollouts and scoring a temperature on 2 cores; "
        "tests/test_memory_signal.py runs it at tiny settings", lambda m, a: m.main(a)),
    "benchmarks.experiments.memory_bottleneck": parse_only(
        "benchmarks.experiments.memory_bottleneck", "about 5 minutes of held-out episodes with --play on 2 cores; "
        "tests/test_memory_bottleneck.py runs it", lambda m, a: m.main(a)),
    "benchmarks.experiments.retrieval_scale.scale": parse_only(
        "benchmarks.experiments.retrieval_scale.scale", "about 15 minutes at 1M passages on 2 cores; "
        "tests/test_scale_benchmark.py runs it at tiny settings", lambda m, a: m.main(a)),
    "benchmarks.experiments.retrieval_scale.concurrency": parse_only(
        "benchmarks.experiments.retrieval_scale.concurrency", "minutes over a 1M-passage index; "
        "tests/test_concurrency_benchmark.py runs it at tiny settings", lambda m, a: m.main(a)),
    "benchmarks.experiments.pretrained_cost": parse_only(
        "benchmarks.experiments.pretrained_cost", "minutes of SmolLM2 training and generation steps on one core",
        lambda m, a: m.main(a)),
    "benchmarks.experiments.pretrained_table": parse_only(
        "benchmarks.experiments.pretrained_table", "hours of SmolLM2 episodes on one core; "
        "tests/test_pretrained_table.py runs it on scripted policies", lambda m, a: m.main(a)),
    "integrations.openenv_server": parse_only("integrations.openenv_server", "a server that runs until stopped; "
                                           "tests/test_openenv_server.py serves through it", lambda m, a: m.main(a),
                                           extra="openenv"),
    "algorithms.mempo": parse_only("algorithms.mempo", TRAINING, lambda m, a: m.main("mempo", a), tyro_cli=True),
    "algorithms.grpo": parse_only("algorithms.mempo", TRAINING, lambda m, a: m.main("grpo", a), tyro_cli=True),
    "algorithms.sft": algorithms_sft,
    "vllm.entrypoints.openai.api_server": vllm_api_server,
    "pytest": python_m_pytest,
    "pip": lambda args, cwd: pip(args),
}
# Programs of another environment or machine: a bare ``python -m`` reference is checked to exist here;
# a command with options must carry a marker naming the test that validates it there.
ELSEWHERE = {"mempo_verl.main": "verl's entry point, in the verl environment (tests/on_verl)"}


def pip(args: list[str]) -> str:
    """pip's own parser for ``pip install ARGS``, and the project's extras named in ``.[a,b]`` exist."""
    assert args and args[0] == "install", f"only pip install is documented, not pip {args[:1]}"
    from pip._internal.commands import create_command
    from pip._vendor.packaging.requirements import Requirement

    try:
        options, requirements = create_command("install").parse_args(args[1:])
    except SystemExit:
        raise AssertionError(f"pip's parser rejects pip {' '.join(args)}") from None
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for spec in [*options.editables, *requirements]:
        local = re.fullmatch(r"\.(?:\[(.*)\])?", spec)
        if local:
            unknown = [e for e in (local.group(1) or "").split(",") if e and e not in extras]
            assert not unknown, f"pyproject.toml has no extra {unknown}"
        else:
            Requirement(spec)
    return "parsed by pip"


def shell_rule(command: str) -> Callable[[Path], str] | str:
    """The check of one shell command, or (a string) why there is none: it is not accounted for."""
    words = shlex.split(command)
    if (assignment := re.fullmatch(r"(\w+)=\$\((.*)\)", command)) is not None:
        inner = shell_rule(assignment.group(2))
        return inner if isinstance(inner, str) else (lambda cwd: f"sets ${assignment.group(1)}: {inner(cwd)}")
    if re.fullmatch(r"\w+=\S+", command):
        return lambda cwd: "sets a shell variable"
    if (module := python_module_args(command)) is not None:
        name, args = module
        if name in MODULES:
            return lambda cwd: MODULES[name](args, cwd)
        if name in ELSEWHERE:
            if args:
                return f"python -m {name} with options runs in another environment: give its block a marker"
            return lambda cwd: elsewhere(name)
        return f"no rule for python -m {name} in tests/test_docs.py MODULES"
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        words = words[1:]  # environment variables before a command
    if words[:2] == ["python", "-c"]:
        return lambda cwd: (compile(words[2], "<python -c>", "exec"), "compiles")[1]
    if words[:1] == ["pip"]:
        return lambda cwd: pip(words[1:])
    if words[:1] == ["bash"] and len(words) > 1 and words[1].startswith("scripts/"):
        return lambda cwd: bash_script(words[1])
    if words[:1] == ["source"]:
        return lambda cwd: "activates an environment a script of the block made"
    if words[:2] in (["ray", "start"], ["vllm", "serve"]):
        return lambda cwd: f"{words[0]}'s own command (a cluster or a GPU server): not run here"
    return f"no rule for the command {words[:1]} in tests/test_docs.py shell_rule"


def elsewhere(name: str) -> str:
    """A bare reference to a program of another environment: its module exists where its package is."""
    if importlib.util.find_spec(name.split(".")[0]) is None:
        return f"its package is not installed here ({ELSEWHERE[name]})"
    assert importlib.util.find_spec(name) is not None, f"no module {name}"
    return f"exists ({ELSEWHERE[name]})"


def bash_script(path: str) -> str:
    script = ROOT / path
    assert script.is_file(), f"{path} does not exist"
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, f"bash -n {path}: {check.stderr}"
    return "exists and parses (bash -n)"


def usage_to_command(text: str) -> str:
    """An inline usage line as the command it describes: ``[--out DIR]`` -> ``--out DIR``, ``DIR...`` ->
    ``DIR`` (an extra's ``.[a,b]`` stays)."""
    return re.sub(r"(\S)\.\.\.(?=\s|$)", r"\1", re.sub(r"(?<!\S)\[([^\]]*)\]", r"\1", text))


# Placeholders the documents use for the reader's own model folder, and what stands in for them here.
PLACEHOLDERS = {"MODEL_DIR": "algorithms/warmup", "FOLDER": "algorithms/warmup", "DIR": "runs/dir"}


def commands_of(block: Block) -> list[str]:
    """The commands of a bash block or inline command, placeholders replaced (``PLACEHOLDERS``)."""
    commands = shell_commands(Block(block.file, block.line, block.heading, block.lang, usage_to_command(block.text))
                              if block.lang == "inline" else block)
    return [re.sub(r"\b(?:" + "|".join(PLACEHOLDERS) + r")\b", lambda m: PLACEHOLDERS[m.group(0)], c)
            for c in commands]


# ---- the tests -----------------------------------------------------------------------------------------
def unaccounted(block: Block) -> list[str]:
    """Why ``block`` is not accounted for (empty when it is)."""
    if block.tested_by:
        file, _, test = block.tested_by.partition("::")
        name = test.split("[")[0]
        path = ROOT / file
        if not (path.is_file() and re.search(rf"^\s*(async )?def {re.escape(name)}\(", path.read_text(), re.M)):
            return [f"its marker names {block.tested_by}, which does not exist"]
        return []
    if block.lang not in (*LANGUAGES, "inline"):
        return [f"its language is {block.lang!r}: use one of {', '.join(LANGUAGES)} (text: not code)"]
    if block.lang == "python":
        return [] if python_rule(block) else ["no entry in tests/test_docs.py PYTHON names it (or several do)"]
    if block.lang in ("bash", "inline"):
        return [f"{c!r}: {rule}" for c in commands_of(block) if isinstance(rule := shell_rule(c), str)]
    return []


def test_every_block_is_accounted_for() -> None:
    problems = [f"{b.where} ({b.heading}): {p}" for b in BLOCKS + INLINE for p in unaccounted(b)]
    stale = [key for key in PYTHON
             if sum(key[0] == b.file and key[1] in b.text for b in BLOCKS if b.lang == "python") != 1]
    problems += [f"PYTHON entry {key} matches no python block (or several): the document changed" for key in stale]
    assert not problems, "code in the documents that no test accounts for:\n" + "\n".join(problems)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working folder where the repository's top-level entries resolve (``algorithms/warmup``)."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "runs"):
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_document_runs(document: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = sorted((b for b in BLOCKS + INLINE if b.file == document and not b.tested_by and not unaccounted(b)),
                   key=lambda b: b.line)
    namespaces: dict[str, dict[str, Any]] = {}
    done, failures = [], []
    for block in items:
        start = time.perf_counter()
        try:
            if block.lang == "python":
                rule = python_rule(block)
                code = block.text
                if isinstance(rule, Run):
                    for old, new in rule.reductions:
                        assert old in code, f"the reduction {old!r} -> {new!r} no longer applies"
                        code = code.replace(old, new)
                    exec(compile(code, block.where, "exec"), namespaces.setdefault(block.heading, {}))
                    done.append(f"{block.where}: ran{' (reduced)' if rule.reductions else ''} "
                                f"[{time.perf_counter() - start:.1f} s]")
                else:
                    compile(code, block.where, "exec")
                    done.append(f"{block.where}: compiled ({rule.why})")
            elif block.lang in ("bash", "inline"):
                for command in commands_of(block):
                    start = time.perf_counter()
                    what = shell_rule(command)(folder)
                    done.append(f"{block.where}: {command[:90]}: {what} [{time.perf_counter() - start:.1f} s]")
        except pytest.skip.Exception as e:  # a check that needs an extra not installed here
            done.append(f"{block.where}: skipped ({e})")
        except Exception as e:  # one report for the whole document
            failures.append(f"{block.where} ({block.heading}): {type(e).__name__}: {e}")
    capsys.readouterr()  # the documented programs' own output
    print("\n".join(done))
    assert not failures, f"{document}: documented code that fails:\n" + "\n".join(failures)


def test_ci_runs_the_readmes_test_command() -> None:
    """The README says CI runs exactly its command 2 (``.ci/run``)."""
    setup = next(b for b in BLOCKS if b.file == "README.md" and b.heading.startswith("Set-up"))
    command = next(line for line in setup.text.splitlines() if line.startswith("bash scripts/install_vllm.sh"))
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_harness_rejects_what_it_cannot_account_for() -> None:
    """A block in an unknown language, an unknown program, an unlisted python block, a marker naming
    a test that does not exist: each is named."""
    cases = {
        Block("docs/x.md", 3, "H", "yaml", "a: 1\n"): "its language is 'yaml'",
        Block("docs/x.md", 5, "H", "bash", "python -m benchmarks.nothing --x\n"): "no rule for python -m benchmarks",
        Block("docs/x.md", 7, "H", "bash", "make all\n"): "no rule for the command ['make']",
        Block("docs/x.md", 9, "H", "python", "print(1)\n"): "no entry in tests/test_docs.py PYTHON",
        Block("docs/x.md", 11, "H", "bash", "python -m mempo_verl.main x=1\n"): "give its block a marker",
        Block("docs/x.md", 13, "H", "bash", "ls\n", "tests/test_docs.py::test_nothing"): "does not exist",
    }
    for block, message in cases.items():
        assert any(message in p for p in unaccounted(block)), (block, unaccounted(block))
    marker = "tests/test_docs.py::test_ci_runs_the_readmes_test_command"
    marked = Block("docs/x.md", 15, "H", "bash", "make all\n", marker)
    assert unaccounted(marked) == []


def test_a_bad_option_fails_the_documented_command(folder: Path) -> None:
    with pytest.raises(AssertionError, match="unrecognized arguments: --episodez 3"):
        shell_rule("python -m benchmarks.run --episodez 3")(folder)
    with pytest.raises(AssertionError, match="pyproject.toml has no extra"):
        shell_rule('pip install -e ".[no-such-extra]"')(folder)
    with pytest.raises(SyntaxError):
        shell_rule('python -c "import ("')(folder)
    with pytest.raises(AssertionError, match="its own parser rejects it"):
        shell_rule("python -m algorithms.mempo --no-such-option")(folder)
