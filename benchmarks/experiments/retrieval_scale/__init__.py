"""Retrieval at its users' scale (docs/experiments/retrieval-scale.md, RESULTS section 6): the on-disk BM25
index and its batching server against the code they replaced and Lucene, from 100k to 5M passages
(``python -m benchmarks.experiments.retrieval_scale.scale``; ``lucene.py`` is Lucene's side, run in
pyserini's own environment), and the environment under concurrency over one shared index
(``python -m benchmarks.experiments.retrieval_scale.concurrency``)."""
