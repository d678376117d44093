"""The own-data command of the documentation (docs/corpus.md) runs as documented with the default (tiny) model (issue 20, item 1):
the tiny model on your own data starts from the synthetic world's base policy."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex

import pytest

from test_readme_commands import doc_pages
from tiny_runs import SMALL_WARM_START, TINY, hydra_cli, read_metrics

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PEOPLE = ["Anna Voss", "Otto Brandt", "Mira Kell", "Jonas Pell", "Lena Oster", "Karl Dorn"]
ORGS = ["Harbor Press", "Vale Works", "North Mill", "Stone Bank", "Elm Hall", "Grey Yard"]


def readme_command() -> list[str]:
    """The arguments of the documented `python train.py data=user ...` line (README.md or a docs page)."""
    for page in doc_pages():
        for line in page.read_text().splitlines():
            if line.startswith("python train.py data=user"):
                return shlex.split(line)[2:]
    raise AssertionError("neither README.md nor a docs page has a `python train.py data=user ...` command")


def write_user_files(folder) -> None:
    docs, questions = [], []
    for i, (person, org) in enumerate(zip(PEOPLE, ORGS)):
        docs.append({"id": f"o{i}", "title": org, "text": f"{org} is a company.\n{org} was founded by {person} in {1950 + i}."})
        docs.append({"id": f"p{i}", "title": person, "text": f"{person} is a person.\n{person} was born in {1920 + i}."})
        questions.append({"question": f"Who founded {org}?", "answer": person})
        questions.append({"question": f"When was the founder of {org} born?", "answer": str(1920 + i)})
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))


def test_readme_own_data_command_trains_the_tiny_model_from_the_synthetic_base_policy(tmp_path, monkeypatch,
                                                                                      small_base_cache):
    args = readme_command()
    assert args[0] == "data=user" and {a.split("=")[0] for a in args} == {"data", "data.corpus_path", "data.questions_path"}
    write_user_files(tmp_path)
    monkeypatch.chdir(tmp_path)  # the README's relative file names
    shrink = [o for o in TINY if o != "model.warm_start=false"] + SMALL_WARM_START
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        hydra_cli(*args, *shrink, "logger=csv", f"hydra.run.dir={tmp_path / 'run'}")
    text = out.getvalue()
    assert "starts from the synthetic world's base policy" in text
    assert re.search(r"\[agentcredit\] final val/accuracy=\d", text), text[-2000:]
    rows = [r for r in read_metrics(tmp_path / "run") if r.get("train/reward")]
    assert [int(r["step"]) for r in rows] == [0, 1]
    assert list((small_base_cache / "base_policy").glob("*/policy.pt"))  # built once for the synthetic world


def test_warm_start_of_another_model_on_own_data_is_one_line_before_loading(tmp_path, monkeypatch):
    from agentcredit.run.train import run
    from agentcredit.common.configs import ConfigError
    from tiny_runs import tiny_config

    write_user_files(tmp_path)
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    cfg = tiny_config(tmp_path, "data=user", f"data.corpus_path={tmp_path / 'corpus.jsonl'}",
                      f"data.questions_path={tmp_path / 'questions.jsonl'}", "model=smollm2_135m", "+model.warm_start=true")
    with pytest.raises(ConfigError, match=r"^model\.warm_start must be false for model=smollm2_135m on your own data"):
        run(cfg)
