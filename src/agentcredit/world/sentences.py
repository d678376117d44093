"""Relations of the synthetic world: how each fact is written on a page and how it is read back.

Every relation has one *cue*: a lower-case word or phrase that appears in every sentence form of
that relation and in no other line of the corpus. A reader can therefore always locate a fact with
`browser.find(cue)` whatever sentence form the page happens to use, and the questions use the same
word ("the founder of ...", "... born?"), so the mapping question -> cue is learnable.

Departure from the TRACE recipe (its Appendix A.4): facts are short template sentences, not web
prose, so that a model of a few million parameters can learn to read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENTITY_TYPES = ("person", "org", "work", "place", "event")


@dataclass(frozen=True)
class Relation:
    name: str
    subject: str  # entity type whose page states the fact
    value: str  # an entity type, or "year" | "count" | "region"
    cue: str
    forms: tuple[str, ...]  # {O} object; {Pron} {pron} {Poss} {poss} person pronouns; {kind} subject kind
    phrase: str = ""  # noun phrase for a hop to an entity value: "the creator of {X}"
    ask: str = ""  # question for a literal value: "In what year was {X} born?"


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in (
        Relation("born", "person", "year", "born",
                 ("{Pron} was born in {O}.", "Records say {pron} was born in {O}.",
                  "{Poss} parents say {pron} was born in {O}."),
                 ask="In what year was {X} born?"),
        Relation("hometown", "person", "place", "hometown",
                 ("{Poss} hometown is {O}.", "{Pron} grew up in {poss} hometown of {O}.",
                  "{O} is {poss} hometown."),
                 phrase="the hometown of {X}"),
        Relation("employer", "person", "org", "employer",
                 ("{Poss} employer is {O}.", "{O} has been {poss} employer for years.",
                  "{Pron} joined {poss} current employer {O} young."),
                 phrase="the employer of {X}"),
        Relation("founded", "org", "year", "founded",
                 ("It was founded in {O}.", "The firm was founded in {O}.",
                  "It has grown steadily since it was founded in {O}."),
                 ask="In what year was {X} founded?"),
        Relation("founder", "org", "person", "founder",
                 ("Its founder is {O}.", "{O} is the founder.", "The founder, {O}, still visits often."),
                 phrase="the founder of {X}"),
        Relation("based_in", "org", "place", "based in",
                 ("It is based in {O}.", "The firm is based in {O}.", "Its main office is based in {O}."),
                 phrase="the town where {X} is based"),
        Relation("staff", "org", "count", "staff",
                 ("It has {O} staff.", "The firm keeps {O} staff on the payroll.",
                  "There are {O} staff in total."),
                 ask="How many staff does {X} have?"),
        Relation("released", "org", "work", "released",
                 ("It released the {wkind} {O} in {Y}.", "In {Y} it released the {wkind} {O}.")),
        Relation("creator", "work", "person", "creator",
                 ("Its creator is {O}.", "{O} is the creator.", "The creator, {O}, worked on it for years."),
                 phrase="the creator of {X}"),
        Relation("appeared", "work", "year", "appeared",
                 ("It first appeared in {O}.", "The {kind} first appeared in {O}."),
                 ask="In what year did {X} first appear?"),
        Relation("awards", "work", "count", "awards",
                 ("Its awards total is {O}.", "The awards total for the {kind} is {O}.",
                  "It collected an awards total of {O}."),
                 ask="What is the awards total of {X}?"),
        Relation("sales", "work", "count", "copies",
                 ("It sold {O} copies.", "The {kind} sold {O} copies in total.", "Sales reached {O} copies."),
                 ask="How many copies of {X} were sold?"),
        Relation("region", "place", "region", "region",
                 ("It lies in the {O} region.", "The town is part of the {O} region.",
                  "{O} is the region it belongs to."),
                 ask="In which region is {X}?"),
        Relation("population", "place", "count", "people",
                 ("It has {O} people.", "Some {O} people live there.", "The town is home to {O} people."),
                 ask="How many people live in {X}?"),
        Relation("mayor", "place", "person", "mayor",
                 ("Its mayor is {O}.", "{O} serves as mayor.", "The current mayor is {O}."),
                 phrase="the mayor of {X}"),
        Relation("took_place", "event", "year", "took place",
                 ("It took place in {O}.", "The {kind} took place in {O}."),
                 ask="In what year did {X} take place?"),
        Relation("venue", "event", "place", "venue",
                 ("Its venue was {O}.", "{O} was the venue.", "The venue chosen was {O}."),
                 phrase="the venue of {X}"),
        Relation("organiser", "event", "org", "organiser",
                 ("Its organiser was {O}.", "{O} was the organiser.", "The organiser was {O}."),
                 phrase="the organiser of {X}"),
        Relation("winner", "event", "person", "prize",
                 ("The prize went to {O}.", "{O} won the prize.", "The top prize was given to {O}."),
                 phrase="the prize winner of {X}"),
        Relation("visitors", "event", "count", "visitors",
                 ("It drew {O} visitors.", "Some {O} visitors came.", "The {kind} drew {O} visitors."),
                 ask="How many visitors did {X} draw?"),
    )
}
CUES: tuple[str, ...] = tuple(r.cue for r in RELATIONS.values())

# The year a work was released, as stated on its organisation's catalogue line. Kept apart from
# `appeared` (stated on the work's own page) so that evidence records which page a reader used.
RELEASED_YEAR = "released_year"

_NAME = r"[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*){0,3}"
_SLOTS = {
    "{O}": None,  # filled per relation
    "{Y}": r"(?P<Y>\d{4})",
    "{Pron}": r"(?:She|He)",
    "{pron}": r"(?:she|he)",
    "{Poss}": r"(?:Her|His)",
    "{poss}": r"(?:her|his)",
    "{kind}": r"[a-z]+",
    "{wkind}": r"[a-z]+",
}


def pronouns(gender: str) -> dict[str, str]:
    female = gender == "f"
    return {"Pron": "She" if female else "He", "pron": "she" if female else "he",
            "Poss": "Her" if female else "His", "poss": "her" if female else "his"}


def render_fact(relation: Relation, form: int, value: str, *, kind: str = "", gender: str = "f",
                year: int | None = None, work_kind: str = "") -> str:
    """One sentence stating `relation` with the given object text, in sentence form number `form`."""
    template = relation.forms[form % len(relation.forms)]
    return template.format(O=value, Y=year, kind=kind, wkind=work_kind, **pronouns(gender))


def _form_regex(relation: Relation, template: str) -> re.Pattern[str]:
    value = r"(?P<O>\d+)" if relation.value in ("year", "count") else f"(?P<O>{_NAME})"
    pattern = re.escape(template)
    for slot, regex in _SLOTS.items():
        pattern = pattern.replace(re.escape(slot), value if slot == "{O}" else regex)
    return re.compile(pattern)


def relation_line_form(relation: Relation) -> str:
    """The one line form of `relation` in the relation line style: "<cue>: <value>"; a catalogue
    line also carries the work's year ("released: Quiet Harbor (2012)")."""
    return "released: {O} ({Y})" if relation.name == "released" else f"{relation.cue}: {{O}}"


def render_relation_line(relation: Relation, value: str, year: int | None = None) -> str:
    return relation_line_form(relation).format(O=value, Y=year)


# Both styles parse everywhere: no sentence form starts with "<cue>: ", so the forms never collide.
_FORM_REGEXES = {name: tuple(_form_regex(r, t) for t in (*r.forms, relation_line_form(r)))
                 for name, r in RELATIONS.items()}


def parse_fact(relation_name: str, line: str) -> tuple[str, int | None] | None:
    """Read `relation_name`'s object (and the year of a catalogue line) from one page line.

    Returns (object text, year or None), or None when the line states no such fact.
    """
    for regex in _FORM_REGEXES[relation_name]:
        match = regex.search(line)
        if match:
            year = match.groupdict().get("Y")
            return match.group("O"), int(year) if year else None
    return None
