"""The generated default task: deterministic, disjoint splits, chains that really need every hop."""

import itertools

import pytest

from mempo_env.tasks.generated import RELATIONS, build_world, make_generated_task


def test_deterministic_from_the_seed():
    a, b = make_generated_task("train", seed=3), make_generated_task("train", seed=3)
    assert [q.question for q in a.questions] == [q.question for q in b.questions]
    assert a.corpus == b.corpus
    assert [q.question for q in make_generated_task("train", seed=4).questions] != [q.question for q in a.questions]


def test_splits_share_the_corpus_and_no_question():
    train, test = make_generated_task("train"), make_generated_task("test")
    assert train.corpus == test.corpus
    assert not {q.id for q in train.questions} & {q.id for q in test.questions}
    assert not {q.question for q in train.questions} & {q.question for q in test.questions}
    assert 0.15 < len(test.questions) / (len(train.questions) + len(test.questions)) < 0.25


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
def test_chains_follow_the_documents(hops):
    task = make_generated_task("test", hops=hops)
    docs = {d.id: d for d in task.corpus}
    for q in task.questions:
        assert len(q.chain) == hops == q.meta["hops"]
        assert q.chain[-1].answer == q.answers[0]
        for step in q.chain:
            doc = docs[step.doc_id]
            assert doc.title == step.query == step.title
            assert step.answer in doc.text  # each hop's answer is stated in that hop's document
        # ...and the next hop starts from the entity this hop revealed
        for prev, nxt in itertools.pairwise(q.chain):
            assert nxt.query == prev.answer


def test_every_relation_phrase_appears_in_questions():
    questions = " ".join(q.question for q in make_generated_task("train", hops=(1, 2)).questions)
    for phrase in RELATIONS:
        head = phrase.split("{x}")[0]
        assert head in questions, phrase


def one_edit(a: str, b: str) -> bool:
    """One substitution, or one inserted character."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def test_distractors_have_confusable_names_and_their_own_documents():
    world = build_world(0, distractors=0.5)
    twins = [e for e in world.entities.values() if e.distractor]
    core = {e.name for e in world.entities.values() if not e.distractor}
    assert twins
    for t in twins:
        assert t.name not in core
        assert any(one_edit(t.name, c) for c in core), t.name
    assert len(world.documents) == len(world.entities)
    assert len(build_world(0, distractors=0.0).documents) < len(world.documents)


def test_knobs_are_validated():
    with pytest.raises(ValueError, match="hops"):
        make_generated_task(hops=5)
    with pytest.raises(ValueError, match="split"):
        make_generated_task("dev")
    small = make_generated_task("train", people=20, cities=8, countries=3, companies=6, films=6, books=4)
    assert len(small.corpus) < len(make_generated_task("train").corpus)


def test_facts_are_stated_in_the_question_words_unless_paraphrased():
    task = make_generated_task("test", hops=1)
    docs = {d.id: d.text for d in task.corpus}
    for q in task.questions:
        phrase = RELATIONS[q.meta["relations"][0]]
        assert phrase.canonical.format(s=q.chain[0].query, o=q.answers[0]) in docs[q.chain[0].doc_id]
    canonical = " ".join(d.text for d in build_world(0).documents)
    varied = " ".join(d.text for d in build_world(0, paraphrases=True).documents)
    assert "is a native of" not in canonical and "is a native of" in varied
