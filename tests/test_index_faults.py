"""The index under faults: what ``--out`` names is never lost, replacing an index never leaves
readers without one, a killed build's leftovers are removed, and damage that keeps every file's size
is refused, at open or by ``verify=True``, never answered silently.

Kill tests kill a real build process with SIGKILL; damage is written into real built indexes.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_index import ROOT, zipf_corpus

from mempo_env.retrieval import index as index_module
from mempo_env.retrieval.index import BM25Index, BM25IndexError, build_index
from mempo_env.types import Document


def write_jsonl(docs: list[Document], path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    return path


def cli(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mempo_env.retrieval.index", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def one_clear_line(done: subprocess.CompletedProcess, pattern: str) -> None:
    """A refusal: a non-zero exit and a single ``error:`` line on stderr naming the problem, no traceback."""
    assert done.returncode != 0, done.stderr[-800:]
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr[-800:]
    assert done.stderr.startswith("error: ") and pattern in done.stderr, done.stderr


def leftovers(parent: Path, name: str) -> list[str]:
    """What builds into ``parent / name`` keep beside it."""
    return sorted(p.name for p in parent.glob(f".{name}.index-*"))


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    return write_jsonl(zipf_corpus(200), tmp_path_factory.mktemp("corpus") / "c.jsonl")


# --- item 2: what --out names ---------------------------------------------------------------------------------

def test_a_folder_that_is_not_an_index_is_refused_and_kept(tmp_path, corpus_file) -> None:
    thesis = tmp_path / "u" / "thesis.tex"
    thesis.parent.mkdir()
    thesis.write_text("x\n")
    one_clear_line(cli("--corpus", corpus_file, "--out", tmp_path / "u", "--workers", "1"),
                   "is a folder that is not an index this command wrote (it holds 'thesis.tex')")
    assert thesis.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["u"]  # nothing written
    # an index folder of an earlier version is replaced, but not one with a file of someone else's in it
    legacy = build_index(enumerate(zipf_corpus(50), 1), tmp_path / "built")
    (tmp_path / "old").mkdir()
    for f in legacy.iterdir():
        (tmp_path / "old" / f.name).write_bytes(f.read_bytes())
    (tmp_path / "old" / "notes.txt").write_text("mine\n")
    one_clear_line(cli("--corpus", corpus_file, "--out", tmp_path / "old", "--workers", "1"), "(it holds 'notes.txt')")
    assert (tmp_path / "old" / "notes.txt").read_text() == "mine\n"


def test_a_file_a_foreign_link_or_a_list_for_metadata_is_refused(tmp_path, corpus_file) -> None:
    (tmp_path / "f").write_text("data\n")
    one_clear_line(cli("--corpus", corpus_file, "--out", tmp_path / "f"), "is a file, not an index folder")
    (tmp_path / "mine").mkdir()
    (tmp_path / "link").symlink_to("mine")
    one_clear_line(cli("--corpus", corpus_file, "--out", tmp_path / "link"), "is a link to mine, not an index")
    (tmp_path / "lst").mkdir()
    (tmp_path / "lst" / "index.json").write_text("[1, 2]")
    one_clear_line(cli("--corpus", corpus_file, "--out", tmp_path / "lst"), "(it holds no index index.json)")
    assert (tmp_path / "f").read_text() == "data\n" and (tmp_path / "link").readlink() == Path("mine")
    assert (tmp_path / "lst" / "index.json").read_text() == "[1, 2]"


@pytest.mark.parametrize("corpus", ["missing.jsonl", "."])
def test_an_unreadable_corpus_is_one_line(tmp_path, corpus) -> None:
    one_clear_line(cli("--corpus", tmp_path / corpus, "--out", tmp_path / "index"), "error: --corpus")
    assert not (tmp_path / "index").exists()


def test_rebuilds_replace_the_index_and_remove_the_replaced(tmp_path) -> None:
    out = tmp_path / "index"
    for n in (30, 40, 50):
        build_index(enumerate(zipf_corpus(n), 1), out)
        assert out.is_symlink() and len(BM25Index(out, verify=True)) == n
        assert leftovers(tmp_path, "index") == [os.readlink(out)]  # only the folder it names
    # a plain folder of an earlier version's index: replaced, and removed
    target = out.resolve()
    out.unlink()
    target.rename(out)
    (out / index_module.MARK).unlink()
    build_index(enumerate(zipf_corpus(60), 1), out)
    assert len(BM25Index(out)) == 60 and leftovers(tmp_path, "index") == [os.readlink(out)]


def test_a_build_interrupted_at_publishing_leaves_the_old_index(tmp_path, monkeypatch) -> None:
    """The old code removed the old index, then renamed the new one into place: an end in between
    left no index at all."""
    out = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")

    replace, rename = os.replace, Path.rename

    def ends_at_publishing(move):
        def move_or_end(src: object, dst: object) -> object:
            if Path(dst) == out:
                raise KeyboardInterrupt  # the process ends here
            return move(src, dst)
        return move_or_end

    monkeypatch.setattr(os, "replace", ends_at_publishing(replace))
    monkeypatch.setattr(Path, "rename", ends_at_publishing(rename))
    with pytest.raises(KeyboardInterrupt):
        build_index(enumerate(zipf_corpus(40), 1), out)
    monkeypatch.undo()
    assert len(BM25Index(out, verify=True)) == 30


def test_a_reader_opening_during_a_rebuild_opens_the_new_index(tmp_path, monkeypatch) -> None:
    """A rebuild that removes the version a reader is opening, between its reading the link and its
    opening the files: the reader opens the new index instead of failing."""
    out = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    opened, rebuilt = BM25Index._open, []

    def open_after_a_rebuild(self: BM25Index, where: Path) -> None:
        if not rebuilt:
            rebuilt.append(build_index(enumerate(zipf_corpus(40), 1), out))
            assert not where.exists()  # the version it is opening is gone
        opened(self, where)

    monkeypatch.setattr(BM25Index, "_open", open_after_a_rebuild)
    assert len(BM25Index(out, verify=True)) == 40


READER = r"""
import sys, pathlib
from mempo_env.retrieval.index import BM25Index
out, stop = sys.argv[1], pathlib.Path(sys.argv[2])
BM25Index(out).close()
print("ready", flush=True)  # imports done: the rebuilds start now, not before its first open in the loop
opens, sizes = 0, set()
while opens == 0 or not stop.exists():
    index = BM25Index(out)  # any failure ends the process with a traceback
    sizes.add(len(index)); opens += 1
    assert len(index.search(["w1 w2"], 3)[0]) == 3
    index.close()
print(opens, sorted(sizes))
"""


def test_readers_always_find_an_index_while_it_is_replaced(tmp_path) -> None:
    """A reader process opening the index in a loop while it is rebuilt 6 times never fails."""
    out = build_index(enumerate(zipf_corpus(300), 1), tmp_path / "index")
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(out), str(stop)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline() == "ready\n", reader.communicate()[1][-2000:]
        for n in (301, 302, 303, 304, 305, 306):
            build_index(enumerate(zipf_corpus(n), 1), out)
            assert reader.poll() is None, reader.communicate()[1][-2000:]
    finally:
        stop.touch()
        stdout, stderr = reader.communicate(timeout=120)
    assert reader.returncode == 0, stderr[-2000:]
    opens, sizes = stdout.split(" ", 1)
    assert int(opens) > 0 and set(json.loads(sizes)) <= set(range(300, 307))
    assert leftovers(tmp_path, "index") == [os.readlink(out)]


def test_a_second_build_into_the_same_out_is_refused(tmp_path) -> None:
    out = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    with (tmp_path / ".index.index-lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BM25IndexError, match="another build into .* is running"):
            build_index(enumerate(zipf_corpus(40), 1), out)
    assert len(BM25Index(out)) == 30


@pytest.fixture(scope="module")
def big_corpus_file(tmp_path_factory) -> Path:
    """Big enough that a build is still running a moment after each of its progress lines."""
    return write_jsonl(zipf_corpus(30_000, seed=5), tmp_path_factory.mktemp("big") / "big.jsonl")


def rebuild_and_check_clean(out: Path, n: int, *keep: str) -> None:
    """The next build into ``out`` succeeds, publishes a whole index and leaves only ``keep`` beside it."""
    done = cli("--corpus", write_jsonl(zipf_corpus(n), out.parent / f"next-{n}.jsonl"), "--out", out, "--workers", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert leftovers(out.parent, out.name) == sorted([os.readlink(out), *keep])
    assert len(BM25Index(out, verify=True)) == n


@pytest.mark.parametrize("line", ["storing passages", "; tokenising", "  tokenised "])
def test_a_build_killed_at_any_stage_leaves_the_old_index_and_is_cleaned_up(tmp_path, big_corpus_file, line) -> None:
    """SIGKILL a real build from outside as it prints ``line`` (storing the passages, tokenising, writing
    the postings and checksums): the old index stays whole; the next build into the same --out removes
    the killed one's folder. Folders that only look like a build's (no mark, something in them) and
    other folders are left alone."""
    out = tmp_path / "index"
    build_index(enumerate(zipf_corpus(30), 1), out)
    foreign = tmp_path / ".index.index-abcdefgh"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not the builder's\n")
    (tmp_path / "other").mkdir()
    build = subprocess.Popen([sys.executable, "-m", "mempo_env.retrieval.index", "--corpus", str(big_corpus_file),
                              "--out", str(out), "--workers", "1"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        for printed in build.stderr:  # bounded: the build ends, and its stderr with it
            if line in printed:
                break
        else:
            pytest.fail(f"the build never printed {line!r}")
        build.send_signal(signal.SIGKILL)
    finally:
        build.kill()
        build.wait(60)
    assert build.returncode == -signal.SIGKILL
    killed = [p for p in leftovers(tmp_path, "index") if p not in (os.readlink(out), foreign.name, ".index.index-lock")]
    assert len(killed) == 1  # its folder, passages and all (partly written)
    assert len(BM25Index(out, verify=True)) == 30  # the old index, whole
    rebuild_and_check_clean(out, 50, foreign.name)
    assert (foreign / "keep.txt").exists() and (tmp_path / "other").is_dir()


KILL_AT = r"""
import os, signal, sys
from pathlib import Path
from mempo_env.retrieval import index as ix
from test_index import zipf_corpus
out, moment = Path(sys.argv[1]), sys.argv[2]
old = out.resolve()
def die():
    os.kill(os.getpid(), signal.SIGKILL)
def before(fn, when):
    def call(*args, **kwargs):
        if when(*args):
            die()
        return fn(*args, **kwargs)
    return call
if moment == "before the link":
    os.symlink = before(os.symlink, lambda src, dst: True)
elif moment == "between the link and the rename":
    os.replace = before(os.replace, lambda src, dst: Path(dst) == out)
elif moment == "after the rename":
    ix._remove_leftovers = before(ix._remove_leftovers, lambda out: out.resolve() != old)
elif moment == "while removing the replaced index":
    os.unlink = before(os.unlink, lambda path, *a: os.path.basename(path) == "postings.npy")
ix.build_index(enumerate(zipf_corpus(40), 1), out)
"""


@pytest.mark.parametrize("moment, survivor", [("before the link", 30), ("between the link and the rename", 30),
                                              ("after the rename", 40), ("while removing the replaced index", 40)])
def test_a_build_killed_while_publishing_leaves_a_whole_index(tmp_path, moment, survivor) -> None:
    """A real build process SIGKILLs itself at a moment of publishing (the code it runs is the
    builder's, with a kill placed before one of its calls): ``out`` holds the old or the new index,
    whole, and the next build removes what the killed one left."""
    out = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    killed = subprocess.run([sys.executable, "-c", KILL_AT, str(out), moment], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert len(BM25Index(out, verify=True)) == survivor
    assert len(leftovers(tmp_path, "index")) > 1  # something to clean up
    rebuild_and_check_clean(out, 50)


def test_folders_killed_builds_of_the_earlier_layout_left_are_removed(tmp_path) -> None:
    """Builds before marks existed wrote into ``.tmp-NAME-XXXXXXXX`` and, killed, left it (passages
    and all): the next build removes such a folder when it holds only index files, and nothing else."""
    stale = tmp_path / ".tmp-index-ab12cd34"
    stale.mkdir()
    for name in ("passages.bin", "offsets.npy", ".part0.npz"):
        (stale / name).write_bytes(b"x")
    kept = [tmp_path / ".tmp-index-zz12zz34", tmp_path / ".tmp-other-ab12cd34"]
    for folder in kept:
        folder.mkdir()
        (folder / ("thesis.tex" if folder.name.endswith("zz34") else "passages.bin")).write_text("mine\n")
    build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    assert not stale.exists() and all(folder.is_dir() and any(folder.iterdir()) for folder in kept)


# --- item 6: damage that keeps every file's size ------------------------------------------------------------------

def damage(folder: Path, name: str, change) -> None:
    """Rewrite ``folder/name`` in place with ``change`` applied: the same size, the same header."""
    path = folder / name
    before = path.stat().st_size
    if name.endswith(".npy"):
        data = np.load(path)
        change(data)
        np.save(path, data)
    else:
        path.write_bytes(change(path.read_bytes()))
    assert path.stat().st_size == before


def scramble(data: bytes) -> bytes:
    return bytes(np.random.default_rng(0).permutation(np.frombuffer(data, np.uint8)))


def zero(a: np.ndarray) -> None:
    a[:] = 0


def set_at(k: int, value: object):
    def change(a: np.ndarray) -> None:
        a[k] = value
    return change


def swap(i: int, j: int):
    def change(a: np.ndarray) -> None:
        a[i], a[j] = a[j].copy(), a[i].copy()
    return change


@pytest.mark.parametrize("name, change, error", [
    ("vocab.bin", scramble, r"vocabulary \(vocab.bin\) does not match the checksum"),
    ("vocab_offsets.npy", swap(5, 9), r"vocabulary \(vocab_offsets.npy\) does not match the checksum"),
    ("max_weights.npy", set_at(3, np.nan), "largest weights .* are damaged"),
    ("indptr.npy", swap(3, 4), r"offsets \(indptr.npy\) are damaged"),
])
def test_damage_is_refused_at_open(tmp_path, name, change, error) -> None:
    folder = build_index(enumerate(zipf_corpus(300), 1), tmp_path / "index")
    damage(folder, name, change)
    with pytest.raises(BM25IndexError, match=error):
        BM25Index(folder)


@pytest.mark.parametrize("name, change, error", [
    ("postings.npy", zero, "postings.npy does not match the checksum"),
    ("postings.npy", set_at(7, -1), "postings name documents outside the corpus"),
    ("weights.npy", set_at(7, np.nan), "weights that are not finite"),
    ("weights.npy", set_at(7, 0.5), "weights.npy does not match the checksum"),
    ("offsets.npy", swap(4, 5), r"offsets \(offsets.npy\) do not ascend"),
    ("passages.bin", lambda data: data[:10] + bytes([data[10] ^ 1]) + data[11:], "passages.bin does not match"),
])
def test_damage_is_refused_by_verify(tmp_path, name, change, error) -> None:
    folder = build_index(enumerate(zipf_corpus(300), 1), tmp_path / "index")
    damage(folder, name, change)
    with pytest.raises(BM25IndexError, match=error):
        BM25Index(folder, verify=True)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_a_negative_posting_is_an_error_not_the_last_passage(tmp_path, compiled) -> None:
    if compiled and not index_module.has_numba():
        pytest.skip("numba (the scale extra) is not installed")
    corpus = zipf_corpus(300)
    folder = build_index(enumerate(corpus, 1), tmp_path / "index")
    index = BM25Index(folder, compiled=compiled)
    term = index.term_id("w0")
    damage(folder, "postings.npy", set_at(int(index._indptr[term]), -1))
    with pytest.raises(BM25IndexError, match="a posting names a document outside the corpus"):
        BM25Index(folder, compiled=compiled).search(["w0"], 300)


@pytest.mark.parametrize("meta, error", [
    ([1, 2], "holds a JSON list, not an index's metadata"),
    ({"format": 2}, "index format 2; this version reads format 3: rebuild it"),
    ("no nnz", "lacks 'nnz'"),
    ("checksums none", "lacks 'checksums'"),
])
def test_bad_metadata_is_refused(tmp_path, meta, error) -> None:
    folder = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    good = json.loads((folder / "index.json").read_text())
    if meta == "no nnz":
        meta = {k: v for k, v in good.items() if k != "nnz"}
    elif meta == "checksums none":
        meta = {**good, "checksums": None}
    (folder / "index.json").write_text(json.dumps(meta))
    with pytest.raises(BM25IndexError, match=error):
        BM25Index(folder)


@pytest.mark.parametrize("meta, error", [([1, 2], "holds a JSON list"), ("no nnz", "lacks 'nnz'")])
def test_bad_metadata_is_one_line_from_the_server(tmp_path, meta, error) -> None:
    """The command that opens an index (the server) refuses damaged metadata in one line, before it listens."""
    folder = build_index(enumerate(zipf_corpus(30), 1), tmp_path / "index")
    good = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({k: v for k, v in good.items() if k != "nnz"} if meta == "no nnz"
                                                  else meta))
    done = subprocess.run([sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(folder), "--port", "0",
                           "--workers", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    one_clear_line(done, error)
