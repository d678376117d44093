"""Plan notes: the one-line reasoning the testbed's searcher writes at the start of every turn.

A question of the testbed preset lists its hops in reading order ("Kestrel Press > founder >
hometown?"). Every turn starts with what is left to read, and the turn right after a page that
answered a hop first copies that fact off the page:

    turn 1   Then: founder hometown.              <search "Kestrel Press">
    turn 2   Then: founder hometown.              <open 0>
    turn 3   founder: Anna Voss                   (the page line, copied)
             Then: hometown.                      <search "Anna Voss">
    turn 4   Then: hometown.                      <open 0>
    turn 5   Then: hometown.                      <answer>Elmford</answer>

Why: a model of a million parameters does not follow a question 500 tokens back, nor parse it
inside-out. With notes every decision depends on a few tokens just before it: the note one turn
back, and a page line that starts with the cue the note names (an induction copy). The answer turn's
note depends on the question alone (`answer_note`), so TRACE's reference is scored right after it,
where the base policy writes its answers (`CreditInputs.answer_reasoning`).

The protocol allows text before a tool call or an answer: it is the turn's private reasoning.
"""

from __future__ import annotations

from agentcredit.world.sentences import RELATIONS


def hop_cues(question) -> list[str]:
    """The cue words of a synthetic question's hops in reading order; [] without a program."""
    program = (getattr(question, "meta", None) or {}).get("program") or []
    return [RELATIONS[op["rel"]].cue for op in program if op.get("op") == "hop"]


def then_note(cues: list[str]) -> str:
    return f"Then: {' '.join(cues)}.\n" if cues else ""


def fact_note(cue: str, value: str) -> str:
    return f"{cue}: {value}\n"


def answer_note(question) -> str:
    """The note before an answer: the last hop still to read. Empty for questions without a program."""
    cues = hop_cues(question)
    return then_note(cues[-1:])
