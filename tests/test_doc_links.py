"""The documents read as a front page, results and records: README.md and benchmarks/RESULTS.md stay
within their sizes, every relative link of the documents (README.md, docs/**/*.md, RESULTS.md) names
a file that exists and, after ``#``, an anchor that file has (a link out of the repository, to
../shared, is not checked), every table renders, and every experiment's record in docs/experiments/ is listed in its
index and linked from the section of RESULTS.md it backs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import DOCUMENTS, ROOT, malformed_tables

# A front page and a results page a reader reads through; the experiments' records hold the rest.
LIMITS = {"README.md": 12_000, "benchmarks/RESULTS.md": 25_000}  # bytes
EXPERIMENTS = ROOT / "docs" / "experiments"
_FENCE = re.compile(r"^( *)```.*?^\1```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """A document without its code blocks and inline code (a link or heading there is not one)."""
    return _CODE.sub("", _FENCE.sub("", path.read_text()))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file: its headings' slugs (a repeated one numbered as GitHub does)
    and its ``<a id="...">`` tags."""
    text = _FENCE.sub("", path.read_text())
    found: set[str] = set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        s = slug(heading.replace("`", ""))
        found.add(f"{s}-{seen[s]}" if s in seen else s)
        seen[s] = seen.get(s, 0) + 1
    return found


def broken_links(document: str) -> list[str]:
    path = ROOT / document
    problems = []
    for target in _LINK.findall(prose(path)):
        if re.match(r"[a-z][\w+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.is_relative_to(ROOT.resolve()):  # ../shared/docs: beside the repository, not in it
            continue
        if not linked.exists():
            problems.append(f"{document}: {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{document}: {target}: {linked.relative_to(ROOT)} has no such anchor")
    return problems


@pytest.mark.parametrize("document, limit", LIMITS.items())
def test_the_front_page_and_the_results_stay_short(document, limit):
    size = len((ROOT / document).read_bytes())
    assert size <= limit, f"{document} is {size:,} bytes, over {limit:,}: move the detail to docs/experiments/"


def test_every_link_of_the_documents_resolves():
    assert "benchmarks/RESULTS.md" in DOCUMENTS and "docs/learners.md" in DOCUMENTS
    assert any(d.startswith("docs/experiments/") for d in DOCUMENTS)
    problems = [p for document in DOCUMENTS for p in broken_links(document)]
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)


def test_every_table_of_the_documents_renders():
    problems = [f"{d}: {p}" for d in DOCUMENTS for p in malformed_tables((ROOT / d).read_text())]
    assert not problems, "tables GitHub would not render:\n" + "\n".join(problems)
    assert malformed_tables("| a | b |\n|---|---|---|\n| 1 | 2 |") == [
        "line 1: 2 header cells, 3 in the delimiter row"]


def test_every_record_is_listed_and_every_results_section_links_its_record():
    records = sorted(p.name for p in EXPERIMENTS.glob("*.md") if p.name != "README.md")
    index = set(_LINK.findall(prose(EXPERIMENTS / "README.md")))
    assert records and not [r for r in records if r not in index], "records missing from docs/experiments/README.md"
    results = prose(ROOT / "benchmarks" / "RESULTS.md")
    sections = re.split(r"^## ", results, flags=re.M)[1:]
    assert len(sections) >= 7
    for section in sections:
        linked = {t.split("#")[0] for t in _LINK.findall(section) if t.startswith("../docs/experiments/")}
        assert linked, f"RESULTS.md's section {section.splitlines()[0]!r} links no record in docs/experiments/"
        assert all((ROOT / "benchmarks" / t).resolve().is_file() for t in linked)


def test_a_broken_link_and_a_missing_anchor_are_named(tmp_path, monkeypatch):
    import test_doc_links as here

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/a.md").write_text("# A\n\n## The `b` part\n\n<a id=\"old-name\"></a>\n\n## The b part\n\n"
                                        "[ok](#the-b-part) [ok](#the-b-part-1) [ok](#old-name) [gone](#the-c-part) "
                                        "[gone](nope.md) `[not a link](nope.md)` [web](https://x.org/y) "
                                        "[beside the repository](../../x.md)\n")
    monkeypatch.setattr(here, "ROOT", tmp_path)
    assert broken_links("docs/a.md") == ["docs/a.md: #the-c-part: docs/a.md has no such anchor",
                                         "docs/a.md: nope.md: no such file"]


@pytest.mark.parametrize("module", ["benchmarks.experiments.learner_comparison.settings",
                                    "benchmarks.experiments.context_strategies"])
def test_each_generated_block_sits_under_the_heading_its_generator_writes_to(module):
    """A rerun with ``--results-md benchmarks/RESULTS.md`` replaces the blocks in place: RESULTS.md and
    the experiment's record each hold the generator's heading as a line of its own, then its block, with no
    other section heading between them; every block is whole (a record may hold more, one under each
    ``--record-heading`` a comparison was written to)."""
    import importlib

    from benchmarks.report import heading_end

    generator = importlib.import_module(module)
    places = (("benchmarks/RESULTS.md", generator.HEADING), (generator.RECORD, generator.RECORD_HEADING))
    for document, heading in places:
        text = (ROOT / document).read_text()
        blocks = re.findall(rf"{re.escape(generator.MARK)}.*?{re.escape(generator.END)}", text, re.S)
        assert blocks and len(blocks) == text.count(generator.MARK) == text.count(generator.END), document
        at = heading_end(text, heading)
        assert at is not None and generator.MARK in text[at:], f"{document}: no block under {heading!r}"
        between = text[at:text.index(generator.MARK, at)]
        assert not re.search(r"^#{1,2} ", between, re.M), f"{document}: a section between {heading!r} and its block"


def test_every_document_anchor_the_code_cites_exists():
    """Docstrings, help texts and table notes point readers to ``docs/FILE.md#anchor``: each must resolve."""
    cited = re.compile(r"((?:docs|benchmarks)/[\w/.-]+\.md)#([\w-]+)")
    problems = []
    for source in sorted(ROOT.glob("*/**/*.py")):
        if any(part.startswith(".") or part in ("runs", "tests") for part in source.relative_to(ROOT).parts):
            continue
        for file, anchor in cited.findall(source.read_text(errors="replace")):
            target = ROOT / file
            if not target.exists() or anchor not in anchors(target):
                problems.append(f"{source.relative_to(ROOT)}: {file}#{anchor}")
    assert not problems, "anchors cited by the code that lead nowhere:\n" + "\n".join(sorted(set(problems)))
