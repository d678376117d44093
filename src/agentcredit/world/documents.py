"""Render every entity as one short page of numbered lines, and record where each fact is stated.

A page is an intro line, the entity's fact lines in varied sentence forms, and distractor lines:
neutral filler and "often confused with <look-alike name>" lines that make retrieval noisy. Each
relation is stated on exactly one page (the subject's); only the catalogue line of an organisation
repeats a work's year, which is what lets a reader pick a work out of a catalogue by period.
"""

from __future__ import annotations

import random

from agentcredit.world import names as N
from agentcredit.world.config import WorldConfig
from agentcredit.world.entities import Entity
from agentcredit.world.program import Fact
from agentcredit.world.sentences import RELATIONS, RELEASED_YEAR, pronouns, render_fact, render_relation_line
from agentcredit.world.types import Document

FACT_RELATIONS = {
    "person": ("born", "hometown", "employer"),
    "org": ("founded", "founder", "based_in", "staff", "released"),
    "work": ("creator", "appeared", "awards", "sales"),
    "place": ("region", "population", "mayor"),
    "event": ("took_place", "venue", "organiser", "winner", "visitors"),
}

_FILLER = {
    "person": ("{Pron} keeps a small garden.", "{Pron} rarely gives interviews.",
               "{Poss} early notes were lost in a flood.", "{Pron} moved house in {year}.",
               "Friends describe {poss} manner as calm.", "{Pron} spent a long summer abroad in {year}.",
               "{Pron} once sailed along the coast alone."),
    "org": ("The office has a green door.", "Its logo shows a small bird.", "A new wing opened in {year}.",
            "Local papers covered it often.", "It moved offices once in {year}.", "Its old sign still hangs outside."),
    "work": ("The cover shows a grey sea.", "Some critics found the ending slow.", "A second edition came out in {year}.",
             "It was translated into several languages.", "Early drafts were much longer.", "Fans still debate its title."),
    "place": ("A stone bridge crosses the river.", "The market opens on Sundays.", "A large fire struck it in {year}.",
              "The old mill is now a museum.", "Its harbour froze over in {year}.", "Many walkers come for the hills."),
    "event": ("Tickets sold out early.", "Rain fell on the second day.", "A new stage was added in {year}.",
              "The closing night ran late.", "Local bakers sold bread at the gates.", "The opening speech was short."),
}
_CONFUSER = ("It is often confused with {other}.", "Do not mix it up with {other}.",
             "{other} is a different page.")
# Longer than the env's default search summary (env.summary_chars=100) when distractors allow.
LEAD_CHARS = 110
_INTRO_KIND = {"org": lambda e: N.ORG_KINDS[e.kind][0]}


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _intro(ent: Entity) -> str:
    kind = _INTRO_KIND.get(ent.type, lambda e: e.kind)(ent)
    return f"{ent.name} is {_article(kind)} {kind}."


def _lookalikes(ent: Entity, same_type: list[Entity]) -> list[Entity]:
    words = set(ent.name.split())
    return [o for o in same_type if o.id != ent.id and words & set(o.name.split())]


def render_page(ent: Entity, ents: dict[str, Entity], by_type: dict[str, list[Entity]],
                cfg: WorldConfig, rng: random.Random) -> tuple[Document, list[Fact]]:
    gender = ent.gender or "f"
    pending: list[tuple[str, list[tuple[str, object]]]] = []  # (line text, [(rel, value), ...] stated on it)
    for rel_name in FACT_RELATIONS[ent.type]:
        rel = RELATIONS[rel_name]
        value = ent.attrs[rel_name]
        if rel_name == "released":
            for work_id in value:
                work = ents[work_id]
                year = work.attrs["appeared"]
                form = rng.randrange(len(rel.forms))  # drawn in both styles: the rest of the world stays the same
                text = (render_relation_line(rel, work.name, year) if cfg.line_style == "relation"
                        else render_fact(rel, form, work.name, year=year, work_kind=work.kind))
                pending.append((text, [("released", work_id), (RELEASED_YEAR, (work_id, year))]))
            continue
        shown = ents[value].name if isinstance(value, str) and value in ents else str(value)
        form = rng.randrange(len(rel.forms))
        text = (render_relation_line(rel, shown) if cfg.line_style == "relation"
                else render_fact(rel, form, shown, kind=ent.kind, gender=gender))
        pending.append((text, [(rel_name, value)]))

    room = max(0, cfg.max_page_lines - 1 - len(pending))
    n_distract = min(room, rng.randint(cfg.distractors_min, cfg.distractors_max))
    look = _lookalikes(ent, by_type[ent.type])
    fillers = list(_FILLER[ent.type])
    rng.shuffle(fillers)
    distractors: list[str] = []
    for k in range(n_distract):
        if look and k == 0 and rng.random() < cfg.near_duplicate_rate:
            distractors.append(rng.choice(_CONFUSER).format(other=rng.choice(look).name))
        else:
            distractors.append(fillers[k % len(fillers)].format(year=rng.randint(1950, 2023), **pronouns(gender)))
    rng.shuffle(distractors)
    # Distractors open the page until the lead is long enough: search results show the page lead,
    # and a result list should point at pages, not answer the question by itself.
    intro = _intro(ent)
    lead: list[tuple[str, list]] = []
    while distractors and len(intro) + sum(len(t) + 1 for t, _ in lead) < LEAD_CHARS:
        lead.append((distractors.pop(), []))
    body = pending + [(t, []) for t in distractors]
    rng.shuffle(body)

    lines = [intro]
    facts: list[Fact] = []
    for text, stated in lead + body:
        for rel_name, value in stated:
            if rel_name == RELEASED_YEAR:
                work_id, year = value
                facts.append(Fact(work_id, RELEASED_YEAR, year, ent.id, len(lines)))
            else:
                facts.append(Fact(ent.id, rel_name, value, ent.id, len(lines)))
        lines.append(text)
    url = f"https://atlas.example/{ent.type}/{N.slug(ent.name)}"
    return Document(id=ent.id, title=ent.name, url=url, lines=tuple(lines)), facts


def render_documents(ents: dict[str, Entity], cfg: WorldConfig,
                     rng: random.Random) -> tuple[tuple[Document, ...], tuple[Fact, ...]]:
    by_type: dict[str, list[Entity]] = {}
    for ent in ents.values():
        by_type.setdefault(ent.type, []).append(ent)
    docs, facts = [], []
    for ent in ents.values():
        doc, page_facts = render_page(ent, ents, by_type, cfg, rng)
        docs.append(doc)
        facts.extend(page_facts)
    return tuple(docs), tuple(facts)
