#!/usr/bin/env bash
# Creates the pyserini environment for benchmarks/experiments/retrieval_scale/lucene.py (default ./.venv-pyserini; another path in
# $1): Lucene BM25 through pyserini, the retriever Search-R1's BM25 server uses, as the anchor the scale
# benchmark compares against. It is separate from the main environment because pyserini pins its own
# stack (transformers, onnxruntime, spacy, nmslib, ...) and needs a JVM; the project is not installed in it.
#
# Why pyserini 0.25.0: Debian 12 (bookworm, this machine's release) ships openjdk-17 only; neither
# bookworm nor bookworm-backports has openjdk-21. pyserini 0.35.0 and later bundle an Anserini jar
# compiled for Java 21 (class file major version 65), which Java 17 cannot load; 0.25.0 (Anserini
# 0.25.0, Lucene 9.9.1) is the newest release whose jar is Java 11 bytecode (major 55), so it runs here.
# Its `pyserini.search` imports torch at module level (pyserini/search/faiss/_searcher.py), so the CPU
# torch build is pinned first, and faiss at module level (pyserini/encode/_base.py): faiss-cpu. openai
# is capped below 2: pyserini/encode/_openai.py builds `openai.OpenAI(api_key='')` at import, which the
# 1.x client accepts and later ones refuse ("Missing credentials").
#
# Then: .venv-pyserini/bin/python benchmarks/experiments/retrieval_scale/lucene.py --help
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-pyserini}"
if ! command -v javac >/dev/null 2>&1 || ! java -version 2>&1 | grep -q 'version "17\.'; then
    apt-get install -y -q openjdk-17-jdk-headless
fi
[ -x "$venv/bin/python" ] || python -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
"${pip[@]}" torch==2.13.0
# datasets: Search-R1's BM25 server reads passage contents through datasets.load_dataset when the
# index does not store them (its own index builder does not), and benchmarks/experiments/retrieval_scale/lucene.py does the same.
"${pip[@]}" pyserini==0.25.0 faiss-cpu "openai<2" datasets
"$venv/bin/python" -c "
from importlib.metadata import version
from pyserini.search.lucene import LuceneSearcher
import jnius
java = jnius.autoclass('java.lang.System').getProperty('java.version')
print('pyserini', version('pyserini'), 'on Java', java, 'in', '$venv')"
