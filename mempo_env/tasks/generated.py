"""The embedded default task: a generated world of fictional entities and k-hop questions over it.

Every entity gets one document stating its facts in templated sentences. A k-hop question follows
k relations from a start entity ("Who is the mayor of the city where the director of the film X
was born?"); hop j can only be resolved by reading the document of the entity reached at hop j-1,
so every hop needs one search. Names are invented, so no pretrained model knows the answers, and
confusable distractor entities ("Orlen Vask" vs "Orlen Vasko") make careless retrieval fail.
Name words come from one fixed pool of invented words shared by all worlds: a tokenizer learns
each as a single token, so a small model copies a name in one or two steps, while which entity
bears which name, and every fact, changes with the world. Everything is a pure function of the seed.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from mempo_env.types import Document, OracleStep, QARecord, QATask


@dataclass(frozen=True)
class Relation:
    subject: str  # entity type
    object: str
    phrase: str  # noun phrase for the question, {x} = the subject
    paraphrases: tuple[str, ...]  # other document wordings, {s} = subject, {o} = object, always last

    @property
    def canonical(self) -> str:
        """The fact in the question's own words: "The mayor of {s} is {o}."."""
        text = self.phrase.format(x="{s}")
        return text[0].upper() + text[1:] + " is {o}."

    def wordings(self, paraphrases: bool) -> tuple[str, ...]:
        """The templates a document picks this fact's sentence from."""
        return (self.canonical, *self.paraphrases) if paraphrases else (self.canonical,)


RELATIONS: dict[str, Relation] = {
    r.phrase: r
    for r in (
        Relation("film", "person", "the director of the film {x}",
                 ("{s} is a film directed by {o}.", "The film {s} was directed by {o}.")),
        Relation("film", "company", "the studio that produced the film {x}",
                 ("{s} was produced by the studio {o}.", "The film {s} is a production of {o}.")),
        Relation("book", "person", "the author of the book {x}",
                 ("{s} is a book written by {o}.", "The book {s} was written by {o}.")),
        Relation("person", "city", "the city where {x} was born",
                 ("{s} was born in {o}.", "{s} is a native of {o}.")),
        Relation("person", "company", "the company that employs {x}",
                 ("{s} works for {o}.", "{s} is employed by {o}.")),
        Relation("company", "city", "the city where {x} has its headquarters",
                 ("{s} has its headquarters in {o}.", "The headquarters of {s} are in {o}.")),
        Relation("company", "person", "the founder of {x}",
                 ("{s} was founded by {o}.",)),
        Relation("city", "person", "the mayor of {x}",
                 ("{s} is governed by the mayor {o}.",)),
        Relation("city", "country", "the country where {x} lies",
                 ("{s} is a city in {o}.", "{s} lies in the country of {o}.")),
        Relation("country", "city", "the capital of {x}",
                 ("The capital city of {s} is {o}.",)),
    )
}

_SYLLABLES = ("ka ri mo lu ve sa no ti ra be do fe ga hi jo ku la me ni po qu ru se ta vi wa xo yu "
              "zen dar mil vor tas kel bran gor lin mar sol ter val wen").split()
_FILM_NOUNS = "Harbor Lantern Orchard Meridian Tide Ember Citadel Glass Summit Echo Veil Compass".split()
_COMPANY_KINDS = "Industries Labs Works Group Systems Foundry".split()
_FILLER = {
    "film": ("{s} was released in {year}.", "{s} runs for {minutes} minutes."),
    "book": ("{s} was first published in {year}.", "{s} has {pages} pages."),
    "person": ("{s} was born in the year {year}.",),
    "city": ("{s} has a population of {population}.",),
    "company": ("{s} was established in {year}.",),
    "country": ("{s} has a population of {population}.",),
}


@dataclass
class Entity:
    id: str
    type: str
    name: str
    distractor: bool = False  # a confusable twin: never a relation object, never a question start
    facts: dict[str, str] = field(default_factory=dict)  # relation phrase -> object entity id


def _word_pool(size: int = 300, seed: int = 1234) -> tuple[str, ...]:
    rng, words = random.Random(seed), []
    while len(words) < size:
        word = (rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES)).capitalize()
        if word not in words:
            words.append(word)
    return tuple(words)


NAME_WORDS = _word_pool()


def _word(rng: random.Random) -> str:
    return rng.choice(NAME_WORDS)


def _name(rng: random.Random, type_: str) -> str:
    if type_ == "person":
        return f"{_word(rng)} {_word(rng)}"
    if type_ == "city":
        return _word(rng)
    if type_ == "country":
        return _word(rng) + rng.choice(("ia", "land", "stan"))
    if type_ == "company":
        return f"{_word(rng)} {rng.choice(_COMPANY_KINDS)}"
    if type_ == "film":
        return f"The {_word(rng)} {rng.choice(_FILM_NOUNS)}"
    return f"{_word(rng)} of {_word(rng)}"  # book


def _confusable(rng: random.Random, name: str) -> str:
    """A near-duplicate name: one letter changed or added in one word."""
    words = name.split()
    i = rng.randrange(len(words))
    w = words[i]
    if rng.random() < 0.5:
        w = w + rng.choice("aeios")
    else:
        j = rng.randrange(1, len(w)) if len(w) > 1 else 0
        w = w[:j] + rng.choice("aeiou") + w[j + 1 :]
    words[i] = w
    return " ".join(words)


@dataclass
class World:
    entities: dict[str, Entity]
    documents: list[Document]


def build_world(
    seed: int = 0,
    *,
    people: int = 80,
    cities: int = 30,
    countries: int = 8,
    companies: int = 24,
    films: int = 30,
    books: int = 20,
    distractors: float = 0.3,
    paraphrases: bool = False,
) -> World:
    """Entities with functional relations and one document each; ``distractors`` is the fraction of
    entities that get a confusable twin (same type, near-identical name, different facts).

    By default a fact is written in its question's words ("The mayor of X is Y."), so finding it is a
    matter of matching text, the easiest reading for a small model trained from scratch;
    ``paraphrases=True`` words each fact at random among that and the relation's paraphrases."""
    rng = random.Random(seed)
    counts = {"person": people, "city": cities, "country": countries,
              "company": companies, "film": films, "book": books}
    used: set[str] = set()
    by_type: dict[str, list[Entity]] = {t: [] for t in counts}
    entities: dict[str, Entity] = {}

    def add(type_: str, name: str, distractor: bool = False) -> Entity:
        used.add(name)
        e = Entity(f"{type_}-{len(by_type[type_]):04d}", type_, name, distractor)
        by_type[type_].append(e)
        entities[e.id] = e
        return e

    for type_, n in counts.items():
        while len(by_type[type_]) < n:
            name = _name(rng, type_)
            if name not in used:
                add(type_, name)
    core = {t: list(es) for t, es in by_type.items()}
    for type_, es in core.items():
        for e in rng.sample(es, round(len(es) * distractors)):
            for _ in range(20):
                name = _confusable(rng, e.name)
                if name not in used:
                    add(type_, name, distractor=True)
                    break

    shuffled = rng.sample(core["city"], len(core["city"]))  # round robin: every country has a city
    city_country = {c.id: core["country"][i % countries].id for i, c in enumerate(shuffled)}
    for e in entities.values():
        for phrase, rel in RELATIONS.items():
            if rel.subject != e.type:
                continue
            if phrase == "the country where {x} lies" and e.id in city_country:
                e.facts[phrase] = city_country[e.id]
            elif phrase == "the capital of {x}":
                mine = [c for c, n in city_country.items() if n == e.id]  # empty for distractors
                e.facts[phrase] = rng.choice(mine or [c.id for c in core["city"]])
            else:
                e.facts[phrase] = rng.choice(core[rel.object]).id

    documents = []
    for e in entities.values():
        sentences = [rng.choice(RELATIONS[p].wordings(paraphrases)).format(s=e.name, o=entities[o].name)
                     for p, o in e.facts.items()]
        sentences += [f.format(s=e.name, year=rng.randrange(1900, 2024), minutes=rng.randrange(80, 180),
                               pages=rng.randrange(120, 900), population=rng.randrange(10, 900) * 1000)
                      for f in _FILLER[e.type]]
        rng.shuffle(sentences)
        documents.append(Document(e.id, e.name, " ".join(sentences)))
    return World(entities, documents)


def _question(world: World, start: Entity, path: list[str]) -> QARecord:
    x = start.name
    chain, current = [], start
    for phrase in path:
        nxt = world.entities[current.facts[phrase]]
        chain.append(OracleStep(query=current.name, doc_id=current.id, title=current.name, answer=nxt.name))
        x = phrase.format(x=x)
        current = nxt
    wh = "Who" if current.type == "person" else "What"
    key = start.id + "|" + "|".join(path)
    qid = "gen-" + hashlib.sha1(key.encode()).hexdigest()[:12]
    return QARecord(qid, f"{wh} is {x}?", [current.name], chain, source="generated",
                    meta={"hops": len(path), "start": start.id, "relations": path})


def generate_questions(world: World, hops: int, n: int, rng: random.Random) -> list[QARecord]:
    """Up to ``n`` distinct ``hops``-hop questions from random non-distractor starts, each visiting
    ``hops + 1`` different entities."""
    starts = [e for e in world.entities.values() if not e.distractor]
    seen: dict[str, QARecord] = {}
    for _ in range(n * 20):
        if len(seen) >= n:
            break
        start = rng.choice(starts)
        path, visited = [], [start.id]
        for _ in range(hops):
            phrase = rng.choice(sorted(world.entities[visited[-1]].facts))
            path.append(phrase)
            visited.append(world.entities[visited[-1]].facts[phrase])
        if len(set(visited)) < len(visited):
            continue  # a chain that revisits an entity ("the capital of the country of C" = C) has a shortcut
        q = _question(world, start, path)
        seen.setdefault(q.id, q)
    return list(seen.values())


def make_generated_task(
    split: str = "train",
    *,
    seed: int = 0,
    hops: int | tuple[int, ...] = (1, 2, 3),
    questions_per_hop: int = 400,
    test_fraction: float = 0.2,
    **world_kwargs: float | bool,
) -> QATask:
    """The generated task's ``train`` or ``test`` split. Both share the corpus and share no question."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    hop_list = (hops,) if isinstance(hops, int) else tuple(hops)
    if not hop_list or any(h < 1 or h > 4 for h in hop_list):
        raise ValueError(f"hops must be between 1 and 4, got {hops!r}")
    world = build_world(seed, **world_kwargs)
    rng = random.Random(seed + 1)
    train, test = [], []
    for h in hop_list:
        qs = generate_questions(world, h, questions_per_hop, rng)
        rng.shuffle(qs)
        cut = round(len(qs) * test_fraction)
        test += qs[:cut]
        train += qs[cut:]
    name = f"generated(seed={seed},hops={','.join(map(str, hop_list))})/{split}"
    return QATask(name, train if split == "train" else test, world.documents)
