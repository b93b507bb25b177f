"""The learner commands the documents print, read from the documents and parsed by the programs themselves
(options, values and their checks), without training: a doc edit cannot drift from the code."""

import pytest
from doc_blocks import code_blocks, python_module_args, shell_commands

TEST = "tests/test_learner_docs.py::test_the_documented_learner_commands_parse"


def test_the_documented_learner_commands_parse(monkeypatch):
    import algorithms.mempo as mempo
    import benchmarks.experiments.learner_comparison.comparison as learners
    from benchmarks.bench_step import parser

    parsed = []
    monkeypatch.setattr(mempo, "train", lambda cfg, data, strategy: parsed.append(cfg))
    monkeypatch.setattr(learners, "compare", lambda out, **settings: parsed.append(settings) or {})
    monkeypatch.setattr(learners, "write_results_section", lambda out, path, record, **where: path)  # nothing written
    blocks = [b for b in code_blocks() if b.tested_by == TEST]
    assert {b.file for b in blocks} >= {"README.md", "docs/learners.md"}
    for block in blocks:
        commands = shell_commands(block)
        assert commands, f"{block.where}: no command"
        for command in commands:
            module, args = python_module_args(command) or (command, [])
            before = len(parsed)
            if module in ("algorithms.mempo", "algorithms.grpo"):
                mempo.main(module.split(".")[1], args)
            elif module == "benchmarks.experiments.learner_comparison":
                learners.main(args)
            elif module == "benchmarks.bench_step":
                parsed.append(parser().parse_args(args))
            else:
                pytest.fail(f"{block.where}: {command!r} is not a learner command")
            assert len(parsed) == before + 1, f"{block.where}: {command!r}"
