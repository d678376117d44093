"""The five question templates of TRACE Table 8, built programmatically from the entity tables.

Each builder returns a `Candidate` (question text, program, intended answer, obfuscations) or None
when the sampled anchor cannot carry that template. The intended answer is computed here from the
entity tables; verification later re-derives it by running the program over the located facts, so
the two paths check each other. `hops` counts distinct evidence pages.

- BRIDGE_ENTITY      named anchor -> masked entities -> attribute       ("the founder of the employer of X")
- REVERSE_LOOKUP     a work known only by its label and period -> its creator (-> more hops)
- INTERSECTION       the one work of a catalogue (org page) meeting a condition on its own page
- COUNTING_FILTERED  how many works of a catalogue (period on org page) meet a condition on their pages
- COMPARATIVE        two masked entities compared on an attribute, or the extreme of a catalogue
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from agentcredit.world.entities import Entity
from agentcredit.world.obfuscation import blur_year, passes, qualitative_constraint
from agentcredit.world.sentences import RELATIONS, RELEASED_YEAR

FUNCTIONAL = {"person": ("employer", "hometown"), "org": ("founder", "based_in"), "work": ("creator",),
              "place": ("mayor",), "event": ("venue", "organiser", "winner")}
LITERAL = {"person": ("born",), "org": ("founded", "staff"), "work": ("appeared", "awards", "sales"),
           "place": ("region", "population"), "event": ("took_place", "visitors")}
ENTITY_ASK = {"person": "Who is {X}?", "org": "Which organisation is {X}?", "place": "Which town is {X}?"}
# A chain ending in based_in reads better as a where-question than "Which town is the town where ...".
BASED_IN_ASK = "In which town is {X} based?"
P_ASK_CREATOR = 0.75
# Work attributes stated only on the work's own page, used to filter or rank a catalogue.
WORK_QUALITIES = ("awards", "sales")
SUPERLATIVE = {("awards", True): "has the highest awards total", ("awards", False): "has the lowest awards total",
               ("sales", True): "sold the most copies", ("sales", False): "sold the fewest copies"}
# attribute -> (entity type compared, wording with the direction words, argmax word, argmin word)
COMPARISONS = {
    "born": ("person", "Who was born {d}: {X} or {Y}?", "later", "earlier"),
    "founded": ("org", "Which was founded {d}: {X} or {Y}?", "later", "earlier"),
    "staff": ("org", "Which has {d} staff: {X} or {Y}?", "more", "fewer"),
    "population": ("place", "Which town has {d} people: {X} or {Y}?", "more", "fewer"),
}


@dataclass
class Candidate:
    template: str
    text: str
    program: list[dict]
    answer: str
    obfuscations: list[str] = field(default_factory=list)


@dataclass
class Ctx:
    ents: dict[str, Entity]
    rng: random.Random
    hops_min: int
    hops_max: int
    question_style: str = "nested"
    by_type: dict[str, list[Entity]] = field(default_factory=dict)
    # entity id -> [(anchor id, relation)] such that anchor.attrs[relation] == entity id
    reached_by: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for ent in self.ents.values():
            self.by_type.setdefault(ent.type, []).append(ent)
            for rel in FUNCTIONAL[ent.type]:
                self.reached_by.setdefault(ent.attrs[rel], []).append((ent.id, rel))


def mention(ent: Entity) -> str:
    return {"work": f"the {ent.kind} {ent.name}", "event": f"the {ent.name}"}.get(ent.type, ent.name)


def _start(ent: Entity) -> dict:
    return {"op": "start", "entity": ent.id, "mention": ent.name}


def _obfuscation_of_hop(target: Entity) -> str:
    return "role_description" if target.type == "person" else "masked_entity"


def _extend_chain(ctx: Ctx, cur: Entity, np: str, ops: list[dict], path: list[str], obf: list[str],
                  hops_left: int, inner: str = "") -> tuple[str, str] | None:
    """Follow `hops_left` more page reads from `cur`; returns (question text, answer).

    `np` names `cur` in the question; `inner` names the entity before it (for BASED_IN_ASK)."""
    final_literal = ctx.rng.random() < 0.6 or hops_left == 0
    for _ in range(hops_left - (1 if final_literal else 0)):
        options = [r for r in FUNCTIONAL[cur.type] if cur.attrs[r] not in path]
        if not options:
            return None
        rel = ctx.rng.choice(options)
        cur = ctx.ents[cur.attrs[rel]]
        ops.append({"op": "hop", "rel": rel})
        inner, np = np, RELATIONS[rel].phrase.format(X=np)
        path.append(cur.id)
        obf.append(_obfuscation_of_hop(cur))
    if final_literal and hops_left > 0:
        rel = ctx.rng.choice(LITERAL[cur.type])
        ops.append({"op": "hop", "rel": rel})
        return RELATIONS[rel].ask.format(X=np), str(cur.attrs[rel])
    if cur.type not in ENTITY_ASK:
        return None
    if ops[-1] == {"op": "hop", "rel": "based_in"}:
        return BASED_IN_ASK.format(X=inner), cur.name
    return ENTITY_ASK[cur.type].format(X=np), cur.name


def build_bridge(ctx: Ctx) -> Candidate | None:
    hops = ctx.rng.randint(ctx.hops_min, ctx.hops_max)
    anchor = ctx.rng.choice(ctx.by_type[ctx.rng.choice(sorted(ctx.by_type))])
    ops, obf = [_start(anchor)], []
    rel = ctx.rng.choice(FUNCTIONAL[anchor.type])  # the first read always masks an entity
    first = ctx.ents[anchor.attrs[rel]]
    ops.append({"op": "hop", "rel": rel})
    obf.append(_obfuscation_of_hop(first))
    done = _extend_chain(ctx, first, RELATIONS[rel].phrase.format(X=mention(anchor)), ops,
                         [anchor.id, first.id], obf, hops - 1, inner=mention(anchor))
    if not done:
        return None
    text = chain_question(anchor, ops) if ctx.question_style == "chain" else done[0]
    return Candidate("BRIDGE_ENTITY", text, ops, done[1], obf)


def chain_question(anchor: Entity, ops: list[dict]) -> str:
    """A bridge question with its hops in reading order, named by their cue words:
    "Kestrel Press > founder > hometown?" (the testbed preset: a small model reads it left to right)."""
    return " > ".join([anchor.name] + [RELATIONS[op["rel"]].cue for op in ops if op["op"] == "hop"]) + "?"


def _orgs_with_works(ctx: Ctx, at_least: int) -> list[Entity]:
    return [o for o in ctx.by_type["org"] if len(o.attrs["released"]) >= at_least]


def _period_with_unique(ctx: Ctx, works: list[Entity], target: Entity) -> tuple[str, tuple[int, int]] | None:
    for whole in ctx.rng.sample((False, True), 2):
        wording, (lo, hi) = blur_year(target.attrs["appeared"], ctx.rng, whole_decade=whole)
        if sum(lo <= w.attrs["appeared"] <= hi for w in works) == 1:
            return wording, (lo, hi)
    return None


def build_reverse_lookup(ctx: Ctx) -> Candidate | None:
    hops = ctx.rng.randint(ctx.hops_min, ctx.hops_max)
    org = ctx.rng.choice(_orgs_with_works(ctx, 1))
    works = [ctx.ents[w] for w in org.attrs["released"]]
    work = ctx.rng.choice(works)
    period = _period_with_unique(ctx, works, work)
    if period is None:
        return None
    wording, year_range = period
    creator = ctx.ents[work.attrs["creator"]]
    ops = [_start(org), {"op": "hop", "rel": "released"},
           {"op": "where", "rel": RELEASED_YEAR, "pred": {"range": list(year_range)}},
           {"op": "hop", "rel": "creator"}]
    obf = ["blurred_time", "masked_entity", "role_description"]
    np = f"the creator of the {work.kind} that {org.name} released {wording}"
    done = _extend_chain(ctx, creator, np, ops, [org.id, work.id, creator.id], obf, hops - 2)
    return Candidate("REVERSE_LOOKUP", done[0], ops, done[1], obf) if done else None


def _catalogue_candidates(ctx: Ctx, org: Entity, need: Callable[[list[Entity]], bool]):
    """Works of `org`, or of one period of its catalogue, with 2..hops_max-1 entries meeting `need`.

    Returns (candidates, wording or "", range or None)."""
    works = [ctx.ents[w] for w in org.attrs["released"]]
    fits = lambda ws: 2 <= len(ws) <= ctx.hops_max - 1 and 1 + len(ws) >= ctx.hops_min  # noqa: E731
    if fits(works) and need(works) and ctx.rng.random() < 0.5:
        return works, "", None
    pivot = ctx.rng.choice(works)
    for whole in ctx.rng.sample((False, True), 2):
        wording, (lo, hi) = blur_year(pivot.attrs["appeared"], ctx.rng, whole_decade=whole)
        inside = [w for w in works if lo <= w.attrs["appeared"] <= hi]
        if fits(inside) and need(inside):
            return inside, wording, (lo, hi)
    return None


def _catalogue_ops(org: Entity, year_range) -> list[dict]:
    ops = [_start(org), {"op": "hop", "rel": "released"}]
    if year_range:
        ops.append({"op": "where", "rel": RELEASED_YEAR, "pred": {"range": list(year_range)}})
    return ops


def _ask_about_work(ctx: Ctx, work: Entity, org: Entity, wording: str, condition: str,
                    ops: list[dict], n_candidates: int) -> tuple[str, str]:
    """Ask for the selected work itself, or (mostly) for its creator, read off the same page.

    Asking for the creator keeps the answer off the catalogue page: a reader who stops after the
    catalogue cannot pick the answer by guessing among the titles; with only two candidates a
    guess would be right half the time, so those always ask for the creator."""
    scope = " ".join(f"{work.kind} released by {org.name} {wording}".split())
    if n_candidates < 3 or ctx.rng.random() < P_ASK_CREATOR:
        ops.append({"op": "hop", "rel": "creator"})
        return f"Who is the creator of the {scope} that {condition}?", ctx.ents[work.attrs["creator"]].name
    return f"Which {scope} {condition}?", work.name


def build_intersection(ctx: Ctx) -> Candidate | None:
    org = ctx.rng.choice(_orgs_with_works(ctx, 2))
    qualities = ctx.rng.sample(WORK_QUALITIES, ctx.rng.choice((1, 2)))
    conditions = [(q, *qualitative_constraint(q, ctx.rng.choice(("high", "low")))) for q in qualities]

    def n_passing(ws: list[Entity], conds=conditions) -> int:
        return sum(all(passes(w.attrs[q], pred) for q, _, pred in conds) for w in ws)

    found = _catalogue_candidates(ctx, org, lambda ws: n_passing(ws) == 1)
    if found is None:
        return None
    cands, wording, year_range = found
    # Every constraint must be needed: without the period, or with one condition fewer, the
    # answer would no longer be unique.
    if year_range and n_passing([ctx.ents[w] for w in org.attrs["released"]]) == 1:
        return None
    if len(conditions) == 2 and any(n_passing(cands, [c]) == 1 for c in conditions):
        return None
    work = next(w for w in cands if n_passing([w]) == 1)
    ops = _catalogue_ops(org, year_range) + [{"op": "where", "rel": q, "pred": pred} for q, _, pred in conditions]
    text, answer = _ask_about_work(ctx, work, org, wording, " and ".join(w for _, w, _ in conditions), ops, len(cands))
    obf = ["qualitative_quantity", "masked_entity"] + (["blurred_time"] if year_range else [])
    return Candidate("INTERSECTION", text, ops, answer, obf)


def build_counting(ctx: Ctx) -> Candidate | None:
    org = ctx.rng.choice(_orgs_with_works(ctx, 2))
    quality = ctx.rng.choice(WORK_QUALITIES)
    words, pred = qualitative_constraint(quality, ctx.rng.choice(("high", "low")))
    some_pass = lambda ws: any(passes(w.attrs[quality], pred) for w in ws)  # noqa: E731
    found = _catalogue_candidates(ctx, org, some_pass)
    if found is None:
        return None
    cands, wording, year_range = found
    count = sum(passes(w.attrs[quality], pred) for w in cands)
    kind = cands[0].kind
    text = " ".join(f"How many {kind}s released by {org.name} {wording}".split()) + f" {words}?"
    ops = _catalogue_ops(org, year_range) + [{"op": "where", "rel": quality, "pred": pred}, {"op": "count"}]
    obf = ["qualitative_quantity"] + (["blurred_time"] if year_range else [])
    return Candidate("COUNTING_FILTERED", text, ops, str(count), obf)


def _build_pair_comparison(ctx: Ctx) -> Candidate | None:
    attr = ctx.rng.choice(sorted(COMPARISONS))
    type_, wording, max_word, min_word = COMPARISONS[attr]
    reachable = [e for e in ctx.by_type[type_] if ctx.reached_by.get(e.id)]
    if len(reachable) < 2:
        return None
    x, y = ctx.rng.sample(reachable, 2)
    if x.attrs[attr] == y.attrs[attr]:
        return None
    (ax, rx), (ay, ry) = ctx.rng.choice(ctx.reached_by[x.id]), ctx.rng.choice(ctx.reached_by[y.id])
    if len({ax, ay, x.id, y.id}) < 4:
        return None
    use_max = ctx.rng.random() < 0.5
    winner = max((x, y), key=lambda e: e.attrs[attr]) if use_max else min((x, y), key=lambda e: e.attrs[attr])
    np_x = RELATIONS[rx].phrase.format(X=mention(ctx.ents[ax]))
    np_y = RELATIONS[ry].phrase.format(X=mention(ctx.ents[ay]))
    text = wording.format(d=max_word if use_max else min_word, X=np_x, Y=np_y)
    ops = [{"op": "union", "branches": [[_start(ctx.ents[ax]), {"op": "hop", "rel": rx}],
                                        [_start(ctx.ents[ay]), {"op": "hop", "rel": ry}]]},
           {"op": "argmax" if use_max else "argmin", "rel": attr}]
    return Candidate("COMPARATIVE", text, ops, winner.name, [_obfuscation_of_hop(x)])


def _build_catalogue_comparison(ctx: Ctx) -> Candidate | None:
    org = ctx.rng.choice(_orgs_with_works(ctx, 2))
    use_max = ctx.rng.random() < 0.5
    quality = ctx.rng.choice(WORK_QUALITIES)

    def unique_extreme(ws: list[Entity]) -> bool:
        values = [w.attrs[quality] for w in ws]
        return values.count(max(values) if use_max else min(values)) == 1

    found = _catalogue_candidates(ctx, org, unique_extreme)
    if found is None:
        return None
    cands, wording, year_range = found
    pick = max if use_max else min
    work = pick(cands, key=lambda w: w.attrs[quality])
    ops = _catalogue_ops(org, year_range) + [{"op": "argmax" if use_max else "argmin", "rel": quality}]
    text, answer = _ask_about_work(ctx, work, org, wording, SUPERLATIVE[(quality, use_max)], ops, len(cands))
    obf = ["masked_entity"] + (["blurred_time"] if year_range else [])
    return Candidate("COMPARATIVE", text, ops, answer, obf)


def build_comparative(ctx: Ctx) -> Candidate | None:
    if ctx.hops_min <= 4 <= ctx.hops_max and ctx.rng.random() < 0.5:
        return _build_pair_comparison(ctx)
    return _build_catalogue_comparison(ctx)


BUILDERS: dict[str, Callable[[Ctx], Candidate | None]] = {
    "BRIDGE_ENTITY": build_bridge,
    "INTERSECTION": build_intersection,
    "COUNTING_FILTERED": build_counting,
    "COMPARATIVE": build_comparative,
    "REVERSE_LOOKUP": build_reverse_lookup,
}
