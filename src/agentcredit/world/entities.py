"""Seeded entity tables: people, organisations, works, places and events with their attributes.

Near-duplicates are made on purpose: surnames are shared, work titles and organisation names
reuse the same few words, and release years of one organisation cluster within a decade, so a
single obvious query returns several plausible pages.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agentcredit.world import names as N
from agentcredit.world.config import WorldConfig

# Share of the corpus per entity type; works outnumber organisations so catalogues have 3-4 entries.
TYPE_SHARES = {"person": 0.30, "org": 0.12, "work": 0.38, "place": 0.08, "event": 0.12}
MAX_CATALOGUE = 7  # works per organisation, so an organisation page stays within max_page_lines
ID_PREFIX = {"person": "per", "org": "org", "work": "wrk", "place": "plc", "event": "evt"}


@dataclass
class Entity:
    id: str
    type: str  # one of sentences.ENTITY_TYPES
    name: str
    kind: str  # role of a person, kind of org / work / event; "town" for places
    gender: str = ""  # people only: "f" | "m" (chooses pronouns)
    attrs: dict = field(default_factory=dict)  # relation name -> entity id | int | str | list of ids


def _counts(num_documents: int) -> dict[str, int]:
    counts = {t: max(4, int(round(share * num_documents))) for t, share in TYPE_SHARES.items()}
    counts["person"] += num_documents - sum(counts.values())
    return counts


def _unique_name(rng: random.Random, make, taken: set[str], tries: int = 500) -> str:
    for _ in range(tries):
        name = make()
        words = name.split()
        if name not in taken and len(set(words)) == len(words):  # no "Hollow Hollow"
            taken.add(name)
            return name
    raise ValueError("name lists are exhausted; lower data.world.num_documents (at most ~1500)")


def _person_name(rng: random.Random, gender: str, used_surnames: list[str], dup_rate: float) -> str:
    first = rng.choice(N.FEMALE_FIRST if gender == "f" else N.MALE_FIRST)
    if used_surnames and rng.random() < dup_rate:
        return f"{first} {rng.choice(used_surnames)}"
    return f"{first} {rng.choice(N.SURNAMES)}"


def _bimodal(rng: random.Random, low: tuple[int, int], high: tuple[int, int], p_high: float) -> int:
    lo, hi = high if rng.random() < p_high else low
    return rng.randint(lo, hi)


def generate_entities(cfg: WorldConfig, rng: random.Random) -> dict[str, Entity]:
    """All entities of the world keyed by id, in a deterministic order for a given seed."""
    counts = _counts(cfg.num_documents)
    taken: set[str] = set()
    ents: dict[str, Entity] = {}

    def new(type_: str, i: int, name: str, kind: str, **kw) -> Entity:
        ent = Entity(f"{ID_PREFIX[type_]}{i:04d}", type_, name, kind, **kw)
        ents[ent.id] = ent
        return ent

    places = [new("place", i, _unique_name(rng, lambda: rng.choice(N.PLACE_HEADS) + rng.choice(N.PLACE_TAILS), taken),
                  "town", attrs={"region": rng.choice(N.REGIONS), "population": rng.randint(8, 900) * 100})
              for i in range(counts["place"])]

    people, surnames = [], []
    for i in range(counts["person"]):
        gender = rng.choice("fm")
        name = _unique_name(rng, lambda: _person_name(rng, gender, surnames, cfg.near_duplicate_rate), taken)
        surnames.append(name.split()[-1])
        people.append(new("person", i, name, rng.choice(N.OTHER_ROLES), gender=gender,
                          attrs={"born": rng.randint(1940, 1995), "hometown": rng.choice(places).id}))

    orgs, org_words = [], []
    kinds = sorted(N.ORG_KINDS)
    for i in range(counts["org"]):
        kind = kinds[i % len(kinds)]
        suffixes = N.ORG_KINDS[kind][1]

        def make() -> str:
            pool = org_words if org_words and rng.random() < cfg.near_duplicate_rate else N.ORG_WORDS
            return f"{rng.choice(pool)} {rng.choice(suffixes)}"

        name = _unique_name(rng, make, taken)
        org_words.append(name.split()[0])
        founder = rng.choice(people)
        founded = min(2012, founder.attrs["born"] + rng.randint(22, 45))
        orgs.append(new("org", i, name, kind, attrs={
            "founded": founded, "founder": founder.id, "based_in": rng.choice(places).id,
            "staff": _bimodal(rng, (4, 60), (300, 2000), 0.4), "released": []}))

    for person in people:
        person.attrs["employer"] = rng.choice(orgs).id

    # Works: each belongs to one organisation's catalogue; an organisation's releases cluster in a
    # decade so that time-filtered questions have several candidates to tell apart.
    base_year = {o.id: rng.randint(max(1975, o.attrs["founded"]), 2014) for o in orgs}
    work_words: list[str] = []
    for i in range(counts["work"]):
        open_orgs = [o for o in orgs if len(o.attrs["released"]) < MAX_CATALOGUE]
        org = orgs[i] if i < len(orgs) else rng.choice(open_orgs or orgs)
        _, _, work_kind, role = N.ORG_KINDS[org.kind]

        def make() -> str:
            if work_words and rng.random() < cfg.near_duplicate_rate:
                word = rng.choice(work_words)
                return rng.choice((f"{word} {rng.choice(N.WORK_NOUNS)}", f"{rng.choice(N.WORK_ADJECTIVES)} {word}"))
            return f"{rng.choice(N.WORK_ADJECTIVES)} {rng.choice(N.WORK_NOUNS)}"

        name = _unique_name(rng, make, taken)
        work_words.extend(name.split())
        year = min(2023, base_year[org.id] + rng.randint(0, 9))
        eligible = [p for p in people if p.attrs["born"] <= year - 18]
        creator = rng.choice(eligible or people)
        creator.kind = role
        work = new("work", i, name, work_kind, attrs={
            "creator": creator.id, "appeared": year, "awards": _bimodal(rng, (0, 2), (6, 9), 0.4),
            "sales": rng.randint(40, 300) * 1000 if rng.random() < 0.4 else rng.randint(2, 40) * 100})
        org.attrs["released"].append(work.id)

    for place in places:
        place.attrs["mayor"] = rng.choice(people).id

    event_kinds = sorted(N.EVENT_KINDS)
    for i in range(counts["event"]):
        kind = rng.choice(event_kinds)
        name = _unique_name(
            rng, lambda: f"{rng.choice(N.EVENT_WORDS)} {rng.choice(N.EVENT_NOUNS)} {N.EVENT_KINDS[kind]}", taken)
        new("event", i, name, kind, attrs={
            "took_place": rng.randint(1990, 2023), "venue": rng.choice(places).id,
            "organiser": rng.choice(orgs).id, "winner": rng.choice(people).id,
            "visitors": rng.randint(2, 400) * 100})
    return ents
