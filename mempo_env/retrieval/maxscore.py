"""The compiled query scorer of ``BM25Index``: MaxScore, document at a time, exact (numba).

MaxScore (Turtle and Flood, 1995) walks a query's posting lists together in document order and keeps
the ``topk`` best documents so far. Its terms are ordered by their largest weight; once the k-th
best score exceeds what the lowest terms' largest weights could add up to, those terms are no longer
walked: only documents holding one of the other ("essential") terms are candidates, and each
candidate looks up the lower terms (a galloping search forward in their lists) only while it can
still reach the k-th best. At a million passages most queries read a few thousand of their postings
instead of the half-million an exhaustive sum reads, and the loop is one compiled call a batch.

Scores are bm25s's bit for bit: a candidate that survives the bounds gets the float32 sum of its
weights in query order (a repeated word twice), the additions ``bm25s`` makes, and ranks by the same
rule (best first, ties in corpus order). The bounds are float64 sums compared with a relative
margin that covers float32 rounding of a query of that length, so pruning never drops a document
that the exact sum would have ranked.

numba is the ``scale`` extra; without it ``BM25Index`` sums every posting with numpy instead (the
same rankings, bm25s's speed).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_NONE = np.iinfo(np.int64).max


@njit(nogil=True, cache=True)
def _seek(postings: np.ndarray, lo: int, hi: int, doc: int) -> int:
    """The first position in ``postings[lo:hi]`` (ascending) holding ``doc`` or a later document, or
    ``hi``: doubling steps from ``lo``, then a binary search inside the last step."""
    if lo >= hi or postings[lo] >= doc:
        return lo
    step = 1
    while lo + step < hi and postings[lo + step] < doc:
        lo += step
        step *= 2
    left, right = lo + 1, min(lo + step, hi)  # postings[lo] < doc; postings[right] >= doc or right == hi
    while left < right:
        mid = (left + right) // 2
        if postings[mid] < doc:
            left = mid + 1
        else:
            right = mid
    return left


@njit(nogil=True, cache=True)
def _rank_query(indptr: np.ndarray, postings: np.ndarray, weights: np.ndarray, max_weights: np.ndarray,
                terms: np.ndarray, topk: int, out_docs: np.ndarray, out_scores: np.ndarray) -> int:
    """One query (its term ids in query order, repeats kept): its best ``topk`` documents written to
    ``out_docs`` and ``out_scores``, best first, ties in corpus order; returns how many there are."""
    n = len(terms)
    distinct = np.empty(n, np.int64)
    count = np.zeros(n, np.int64)
    slot = np.empty(n, np.int64)  # query position -> distinct term
    nd = 0
    for p in range(n):
        j = 0
        while j < nd and distinct[j] != terms[p]:
            j += 1
        if j == nd:
            distinct[nd] = terms[p]
            nd += 1
        count[j] += 1
        slot[p] = j
    if nd == 0:
        return 0
    bound = np.empty(nd, np.float64)
    for j in range(nd):
        bound[j] = np.float64(max_weights[distinct[j]]) * count[j]
    order = np.argsort(bound, kind="mergesort")  # rank r -> distinct term, lowest bound first
    prefix = np.empty(nd, np.float64)  # prefix[r]: the bounds of ranks 0..r summed
    cur = np.empty(nd, np.int64)
    end = np.empty(nd, np.int64)
    total = 0.0
    for r in range(nd):
        total += bound[order[r]]
        prefix[r] = total
        cur[r] = indptr[distinct[order[r]]]
        end[r] = indptr[distinct[order[r]] + 1]
    margin = 1.0 + 1e-5 + n * 2.4e-7  # float32 sums of n terms err by at most about n * 1.2e-7
    weight = np.zeros(nd, np.float32)  # the current candidate's weight of each distinct term
    heap_docs = np.empty(topk, np.int64)
    heap_scores = np.empty(topk, np.float32)
    size, worst, kth = 0, 0, 0.0  # kth: the k-th best score once there are k, else 0 (scores are > 0)
    first = 0  # ranks below ``first`` cannot lift a document to ``kth`` together: not walked
    while first < nd:
        doc = _NONE
        for r in range(first, nd):
            if cur[r] < end[r] and postings[cur[r]] < doc:
                doc = postings[cur[r]]
        if doc == _NONE:
            break
        partial = 0.0
        for j in range(nd):
            weight[j] = 0
        for r in range(first, nd):
            c = cur[r]
            if c < end[r] and postings[c] == doc:
                weight[order[r]] = weights[c]
                partial += np.float64(weights[c]) * count[order[r]]
                cur[r] = c + 1
        alive = True
        for r in range(first - 1, -1, -1):
            if (partial + prefix[r]) * margin < kth:
                alive = False
                break
            c = _seek(postings, cur[r], end[r], doc)
            cur[r] = c
            if c < end[r] and postings[c] == doc:
                weight[order[r]] = weights[c]
                partial += np.float64(weights[c]) * count[order[r]]
        if not alive:
            continue
        score = np.float32(0)
        for p in range(n):
            score = score + weight[slot[p]]  # float32, in query order: bm25s's additions
        if size < topk:
            heap_docs[size], heap_scores[size] = doc, score
            size += 1
        elif score > heap_scores[worst]:  # a tie loses: the earlier document ranks first
            heap_docs[worst], heap_scores[worst] = doc, score
        else:
            continue
        if size == topk:
            worst = 0
            for i in range(1, topk):  # the lowest score, of those the latest document
                if heap_scores[i] < heap_scores[worst] or (heap_scores[i] == heap_scores[worst]
                                                           and heap_docs[i] > heap_docs[worst]):
                    worst = i
            kth = np.float64(heap_scores[worst])
            while first < nd and prefix[first] * margin < kth:
                first += 1
    for i in range(size):  # best first, ties by document: an insertion sort of at most topk
        d, s = heap_docs[i], heap_scores[i]
        j = i
        while j > 0 and (out_scores[j - 1] < s or (out_scores[j - 1] == s and out_docs[j - 1] > d)):
            out_docs[j], out_scores[j] = out_docs[j - 1], out_scores[j - 1]
            j -= 1
        out_docs[j], out_scores[j] = d, s
    return size


@njit(nogil=True, cache=True)
def rank_batch(indptr: np.ndarray, postings: np.ndarray, weights: np.ndarray, max_weights: np.ndarray,
               query_ptr: np.ndarray, query_terms: np.ndarray, topk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of queries, query ``i``'s term ids being ``query_terms[query_ptr[i]:query_ptr[i + 1]]``:
    per query its hits in ``docs[i, :found[i]]`` and ``scores[i, :found[i]]``. It holds no
    interpreter lock, so threads score shards of a batch on every core."""
    nq = len(query_ptr) - 1
    docs = np.zeros((nq, topk), np.int64)
    scores = np.zeros((nq, topk), np.float32)
    found = np.zeros(nq, np.int64)
    for i in range(nq):
        found[i] = _rank_query(indptr, postings, weights, max_weights, query_terms[query_ptr[i]:query_ptr[i + 1]],
                               topk, docs[i], scores[i])
    return docs, scores, found
