"""Secrets never reach a file, a folder name or W&B (issue 20, item 3): refused on the command line
and in config files, read from the environment; the judge sends its key only to its configured
endpoint and says which one that is."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from pathlib import Path

import pytest

from agentcredit.common.secret_keys import is_secret_key, secret_keys_in_override, secret_override_problem
from agentcredit.checks.validation import ConfigError, prepare_config
from test_openai_judge import ScriptedServer, answer
from tiny_runs import ROOT, TINY, hydra_cli, tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SECRET = "sk-issue20-never-write-me"


@pytest.mark.parametrize("key, secret", [
    ("judge.api_key", True), ("judge.apikey", True), ("x.hf_token", True), ("token", True), ("a.client_secret", True),
    ("db_password", True), ("hydra.job.env_set.WANDB_API_KEY", True), ("openai_api_key", True),
    ("rollout.max_turn_tokens", False), ("rollout.max_obs_tokens", False), ("judge.max_completion_tokens", False),
    ("warmstart.window_batch_size", False), ("model.tokenizer", False), ("judge.model", False),
    # issue 44, item 4: every spelling of a secret name (camelCase, kebab, dotted, headers)
    ("extra.accessToken", True), ("openaiApiKey", True), ("api-key", True), ("secretKey", True),
    ("headers.Authorization", True), ("aws.access_key", True), ("X-Api-Key", True), ("DB_PASSWORD", True),
    ("gcp.credentials", True), ("auth", True), ("refresh_token", True), ("Cookie", True), ("passphrase", True),
    ("rollout.vllm.kv_cache_gib", False), ("rollout.max_context_tokens", False), ("key_dim", False),
    ("pad_token_id", False), ("author", False), ("sort_keys", False), ("tokenizer_name", False),
    # whole words only: a password's short spellings and a session id, not words they end
    ("x.pwd", True), ("db.pass", True), ("smtp_pw", True), ("x.session", True), ("session_id", True),
    ("sessionId", True), ("bypass", False), ("compass_heading", False), ("session_name", False), ("num_passes", False),
])
def test_which_keys_are_secret(key, secret):
    assert is_secret_key(key) is secret


REFUSED = {
    "plain": [f"judge.api_key={SECRET}"],
    "appended": [f"+judge.api_key={SECRET}"],
    "forced": [f"++judge.api_key={SECRET}"],
    "other secret key": [f"+model.hf_token={SECRET}"],
    "through hydra's env_set": [f"hydra.job.env_set.AGENTCREDIT_JUDGE_API_KEY={SECRET}"],
    "sweep": ["-m", "credit=grpo,trace", f"judge.api_key={SECRET},other"],
    # Inside a dict or list value (issue 30, item 2): Hydra would write these into .hydra/*.yaml and,
    # under -m, name the job folder after them and put them in multirun.yaml.
    "in a dict value": [f"++judge={{kind:openai,model:m,api_key:{SECRET}}}"],
    "in a dict value of a sweep": ["-m", f"+extra={{api_key:{SECRET}}}", "seed=0,1"],
    "in a sweep of dicts": ["-m", f"+extra={{a:1}},{{token:{SECRET}}}"],
    "nested in a list": [f"+extra=[1,{{b:{{password:{SECRET}}}}}]"],
    "unparseable dict": [f"+extra={{a:1,api_key:{SECRET}"],
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_secret_on_the_command_line_is_refused_before_anything_is_written(tmp_path, capsys, case):
    args = [*REFUSED[case], "judge=openai", f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/sweep"]
    with pytest.raises(SystemExit) as exit_info:
        hydra_cli(*args)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: ") and "must not be given on the command line" in lines[0]
    assert SECRET not in captured.err + captured.out
    assert list(tmp_path.iterdir()) == []  # no run folder, no .hydra/, no sweep job folder
    if "judge.api_key" in lines[0]:
        assert "set AGENTCREDIT_JUDGE_API_KEY in the environment or in .env" in lines[0]


def test_non_secret_overrides_pass():
    assert secret_override_problem(["rollout.max_turn_tokens=16", "judge.model=m", "-m", "--cfg", "job",
                                    "+extra={max_turn_tokens:3,model:[a,b]}", "seed=0,1"]) is None


@pytest.mark.parametrize("override, keys", [
    ("++judge={kind:openai,api_key:x}", ["judge.api_key"]),
    ("+extra=[1,{token:2}]", ["extra.1.token"]),
    ("+extra={a:{client_secret:1}},{b:2}", ["extra.a.client_secret"]),
    ("+extra=choice({api_key:1},2)", ["extra.api_key"]),
    ("hydra.job.env_set={WANDB_API_KEY:x}", ["hydra.job.env_set.WANDB_API_KEY"]),
    ("+extra={a:1,api_key:", ["extra.api_key"]),  # Hydra cannot parse it; the text is scanned instead
    ("rollout={max_turn_tokens:3}", []),
])
def test_secret_keys_inside_override_values(override, keys):
    assert secret_keys_in_override(override) == keys


def test_a_secret_in_a_config_file_is_refused_an_env_interpolation_is_not(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"^judge\.api_key holds a secret in the config.*AGENTCREDIT_JUDGE_API_KEY"):
        prepare_config(tiny_config(tmp_path, "judge=openai", f"judge.api_key={SECRET}"))
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    cfg = prepare_config(tiny_config(tmp_path, "judge=openai", "judge.api_key=${oc.env:MY_JUDGE_KEY}"))
    assert cfg.judge.api_key == SECRET


@pytest.fixture
def isolated_wandb(monkeypatch, tmp_path):
    import os

    for key in [k for k in os.environ if k.startswith(("WANDB_", "AGENTCREDIT_JUDGE_"))]:
        monkeypatch.delenv(key)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTCREDIT_JUDGE_API_KEY", SECRET)  # where the key belongs


def files_holding(folder, value: str) -> list[str]:
    found = []
    for root, _, names in os.walk(folder):  # (os.walk passes over a folder that vanishes while it lists)
        for path in (Path(root) / name for name in names):
            try:
                if value.encode() in path.read_bytes():
                    found.append(str(path))
            except FileNotFoundError:  # a temporary file of wandb's writer, gone since the listing
                pass
    return found


def wait_for_wandb(folder, runs: int = 1) -> None:
    """Until `runs` wandb files are written under `folder`, none empty: a grep of a folder without one would pass
    whatever it should find."""
    for _ in range(240):  # wandb's writer process may still be flushing on a busy machine
        try:
            files = list(folder.rglob("run-*.wandb"))
            if len(files) >= runs and all(p.stat().st_size for p in files):
                return
        except FileNotFoundError:  # a folder or file renamed while it was listed: look again
            pass
        time.sleep(0.5)
    pytest.fail(f"fewer than {runs} non-empty run-*.wandb under {folder} after 120 s")


PROVER_OPENAI = ["credit=prover", "judge=openai", "judge.model=m", "judge.base_url=http://127.0.0.1:9/v1",
                 "logger=wandb", "logger.mode=offline"]


def test_grep_a_run_and_its_wandb_folder_for_the_secret(tmp_path, isolated_wandb, capsys):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        hydra_cli(*TINY, *PROVER_OPENAI, f"hydra.run.dir={tmp_path}/run")
    run = tmp_path / "run"
    wait_for_wandb(run)
    assert (run / ".hydra" / "config.yaml").exists() and list((run / "wandb").glob("offline-run-*"))
    assert files_holding(run, SECRET) == [] and files_holding(tmp_path / "wandb_home", SECRET) == []
    assert SECRET not in out.getvalue() + capsys.readouterr().err


def test_grep_a_sweep_and_its_wandb_folders_for_the_secret(tmp_path, isolated_wandb, capsys):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        hydra_cli("-m", *TINY, *PROVER_OPENAI, "seed=0,1", f"hydra.sweep.dir={tmp_path}/sweep")
    sweep = tmp_path / "sweep"
    wait_for_wandb(sweep, runs=2)
    jobs = [p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(jobs) == 2 and all(list((j / "wandb").glob("offline-run-*")) for j in jobs)
    assert files_holding(sweep, SECRET) == [] and files_holding(tmp_path / "wandb_home", SECRET) == []
    assert all(SECRET not in p.name for p in sweep.rglob("*"))
    assert SECRET not in out.getvalue() + capsys.readouterr().err


def test_an_endpoint_from_the_environment_is_logged_without_its_credentials(monkeypatch, caplog):
    from agentcredit.judge.openai_judge import OpenAIChatBackend

    monkeypatch.setenv("AGENTCREDIT_JUDGE_BASE_URL", "https://alice:S3cretPassw0rd@gw.example.com:8443/v1?api-key=plainvalue")
    monkeypatch.setenv("AGENTCREDIT_JUDGE_MODEL", "m")
    monkeypatch.delenv("AGENTCREDIT_JUDGE_API_KEY", raising=False)
    with caplog.at_level(logging.INFO, logger="agentcredit.judge.openai_judge"):
        OpenAIChatBackend.from_config()
    assert caplog.messages == ["judge=openai: model m at https://gw.example.com:8443/v1, with no key"]
    from agentcredit.common.secret_keys import REDACTED, url_for_logs

    assert url_for_logs("http://[::1]:8000/v1?key=x") == "http://[::1]:8000/v1"
    assert url_for_logs("http://localhost:99999/v1") == REDACTED  # a port out of range: no error from a log line


def test_which_values_are_secret_in_a_url():
    from agentcredit.common.secret_keys import secret_value_kind

    assert secret_value_kind("https://x.example.com/a?access_token=zz") == "a secret in a URL's query string"
    assert secret_value_kind("https://x.example.com/a?sig=abc&page=2") == "a secret in a URL's query string"
    for ordinary in ("https://x.example.com/search?page=2&q=hello", "https://x.example.com/a?token=",
                     "http://localhost:8000/v1", "outputs/runs/a?key=b"):
        assert secret_value_kind(ordinary) is None, ordinary


def test_the_judge_sends_its_key_only_to_the_configured_endpoint(monkeypatch, caplog):
    from agentcredit.judge import build_judge
    from agentcredit.judge.openai_judge import OPENAI_API, OpenAIChatBackend
    from judge_fixtures import expert_traj, failed_traj, error_traj, QUESTION
    from agentcredit.judge import build_judge_context

    configured, elsewhere = ScriptedServer([answer(0, 0)]), ScriptedServer([answer(0, 0)])
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", elsewhere.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "not-this-one")
        monkeypatch.setenv("AGENTCREDIT_JUDGE_API_KEY", SECRET)
        monkeypatch.setenv("AGENTCREDIT_JUDGE_BASE_URL", configured.base_url)
        with caplog.at_level(logging.INFO, logger="agentcredit.judge.openai_judge"):
            judge = build_judge({"kind": "openai", "model": "m", "max_retries": 0})
        assert caplog.messages == [f"judge=openai: model m at {configured.base_url}, with the key from AGENTCREDIT_JUDGE_API_KEY"]
        context = build_judge_context([expert_traj(), failed_traj(), error_traj()], QUESTION.text, chosen=0,
                                      max_segment_turns=4, success_threshold=1.0)
        judge.propose(context)
        assert configured.auth == [f"Bearer {SECRET}"] and elsewhere.auth == []
        assert configured.requests[0]["max_completion_tokens"] == 512  # the default cap
        # No base URL anywhere: the OpenAI API itself, not $OPENAI_BASE_URL.
        monkeypatch.delenv("AGENTCREDIT_JUDGE_BASE_URL")
        backend = OpenAIChatBackend.from_config(model="m")
        assert backend.base_url == OPENAI_API and str(backend.client.base_url).rstrip("/") == OPENAI_API
    finally:
        configured.close()
        elsewhere.close()


# --- issue 44, item 4: no secret under any name, in any file, folder name or W&B ----------------------------

LEAK = "sk-issue44-Zq8vR2mX7pL4wK9d"  # what every refusal below must keep off the disk
SPELLINGS = {  # the probe's 14 spellings (11 leaked), and more; each is refused by its name or its value
    "camelCase token": [f"+extra.accessToken={LEAK}"],
    "camelCase api key": ["+extra.openaiApiKey=plainvalue"],
    "kebab api key": ["+extra.api-key=plainvalue"],
    "secretKey in a dict": ["+extra={secretKey:plainvalue}"],
    "authorization header": ["+headers={Authorization:'Bearer abcdefgh12345678'}"],
    "dotted aws access key": ["+aws.access_key=plainvalue"],
    "value under an ordinary key": [f"+extra.note={LEAK}"],
    "value in a list": [f"+extra.notes=[a,{LEAK}]"],
    "value as a sweep choice": ["-m", f"+extra.note=a,{LEAK}"],
    "key in a sweep of dicts": ["-m", "+extra={a:1},{accessToken:plainvalue}"],
    "password in a url": ["judge.base_url=https://bob:hunter2pw@example.com/v1"],
    "key in a url's query string": ["judge.base_url='https://gw.example.com/v1?api-key=0123456789abcdef0123456789abcdef'"],
    "short key in a url's query": ["+extra.endpoint='https://maps.example.com/api?key=plainvalue&q=x'"],
    "query key in a sweep choice": ["-m", "+extra.endpoint=http://a.example.com/v1,'https://b.example.com/v1?token=plainvalue'"],
    "github token": ["+extra.note=ghp_Zq8vR2mX7pL4wK9dT3nB6cY1"],
    "hugging face token": ["+extra.note=hf_Zq8vR2mX7pL4wK9dT3nB6cY1"],
    "aws key id": ["+extra.note=AKIAIOSFODNN7EXAMPLE"],
    "slack token": ["+extra.note=xoxb-1234567890-abcdefghij"],
    "json web token": ["+extra.note=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl"],
    "random-looking value": ["+extra.note=Zq8vR2mX7pL4wK9dT3nB6cY1"],
    "env_set of a cased name": ["hydra.job.env_set.OpenAI_Api_Key=plainvalue"],
}


def assert_refused_and_nothing_written(tmp_path, capsys, args, where=("must not be given on the command line",)):
    with pytest.raises(SystemExit) as exit_info:
        hydra_cli(*args, *TINY, "trainer.max_steps=1", f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/sweep")
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exit_info.value.code == 2, captured.err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("config error: ") and any(w in lines[0] for w in where), lines
    assert LEAK not in captured.err + captured.out and "plainvalue" not in captured.err + captured.out
    assert [p.name for p in tmp_path.iterdir() if p.name not in ("conf", "wandb_home")] == []  # nothing written


@pytest.mark.parametrize("case", SPELLINGS)
def test_every_spelling_of_a_secret_is_refused_before_anything_is_written(tmp_path, capsys, case):
    assert_refused_and_nothing_written(tmp_path, capsys, SPELLINGS[case])


def experiment_file(tmp_path, body: str, group: str = "experiment", name: str = "leaky") -> str:
    folder = tmp_path / "conf" / group
    folder.mkdir(parents=True)
    (folder / f"{name}.yaml").write_text(body)
    return str(tmp_path / "conf")


@pytest.mark.parametrize("body, args", [
    # the probe's case: a key in a --config-dir experiment file was refused only after Hydra copied it
    (f"# @package _global_\njudge:\n  api_key: {LEAK}\n", ["experiment=leaky"]),
    (f"# @package _global_\nextra:\n  note: {LEAK}\n", ["experiment=leaky"]),  # by value, any key
    (f"# @package _global_\nhydra:\n  sweeper:\n    params:\n      +extra.note: a,{LEAK}\n", ["-m", "experiment=leaky"]),
    (f"# @package _global_\nhydra:\n  job:\n    env_set:\n      WANDB_API_KEY: {LEAK}\n", ["experiment=leaky"]),
])
def test_a_secret_in_a_config_dir_file_is_refused_before_hydra_copies_it(tmp_path, capsys, body, args):
    conf = experiment_file(tmp_path, body)
    assert_refused_and_nothing_written(tmp_path, capsys, ["--config-dir", conf, *args], where=("holds a secret in",))


def test_a_secret_in_a_config_group_default_is_refused(tmp_path, capsys):
    conf = experiment_file(tmp_path, f"kind: openai\nmodel: m\napi_key: {LEAK}\n", group="judge", name="mine")
    assert_refused_and_nothing_written(tmp_path, capsys, [f"--config-dir={conf}", "credit=prover", "judge=mine"],
                                       where=("holds a secret in",))


def composed_problem(args, monkeypatch, combinations: int = 1):
    """What train.py's check says of `args`, composing each value of each swept key once (all combinations
    are what a sweep of up to MAX_COMBINATIONS jobs gets; one value each keeps the default suite fast)."""
    from agentcredit.checks import secret_check
    from agentcredit.common.configs import register_config_nodes

    register_config_nodes()
    monkeypatch.setattr(secret_check, "MAX_COMBINATIONS", combinations)
    configs = list(secret_check.composed_configs(args, str(ROOT / "train.py"), "src/agentcredit/conf", "config"))
    assert configs  # composed, not skipped
    return [keys for _, cfg in configs for keys in secret_check.secret_values_in_config(cfg)] or None


@pytest.mark.parametrize("args", [["-m", "judge=openai,heuristic", "logger=wandb,csv", "seed=0,1"],
                                  ["-m", "experiment=compare"], ["judge=openai", "model=hf"]])
def test_no_composed_config_of_the_project_is_refused(args, monkeypatch):
    assert composed_problem(args, monkeypatch) is None


SPEC_GROUPS = {"tuning"}  # conf/ folders of specs that scripts/tune.py reads (each job's grid point reaches train.py as overrides)


def config_group_choices() -> list[list[str]]:
    conf = ROOT / "src" / "agentcredit" / "conf"
    return [["-m", f"experiment={p.stem}"] for p in sorted((conf / "experiment").glob("*.yaml"))] + [
        [f"{group.name}={p.stem}"] for group in sorted(conf.iterdir()) if group.is_dir() and group.name != "experiment"
        for p in sorted(group.glob("*.yaml"))]


@pytest.mark.slow
@pytest.mark.parametrize("args", config_group_choices(), ids=" ".join)
def test_no_experiment_file_or_config_group_of_the_project_is_refused(args, monkeypatch):
    group, _, name = args[-1].partition("=")
    if group in SPEC_GROUPS:  # read by scripts/tune.py, not composed by train.py: the file itself holds no secret
        from omegaconf import OmegaConf

        from agentcredit.checks import secret_check

        spec = OmegaConf.load(ROOT / "src" / "agentcredit" / "conf" / group / f"{name}.yaml")
        assert not list(secret_check.secret_values_in_config(spec))
        return
    assert composed_problem(args, monkeypatch, combinations=64) is None


def test_an_env_interpolation_stays_unresolved_in_every_file(tmp_path, isolated_wandb, capsys):
    """The run resolves ${oc.env:...}; resolved_config.yaml and W&B keep the interpolation (the probe found
    the value resolved into resolved_config.yaml). The job's own log is left out of the grep: it is not
    written from the config."""
    note = "${oc.env:AGENTCREDIT_JUDGE_API_KEY}"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        hydra_cli(*TINY, "trainer.max_steps=1", *PROVER_OPENAI, f"+note={note}", f"hydra.run.dir={tmp_path}/run")
    run = tmp_path / "run"
    wait_for_wandb(run)
    assert note in (run / "resolved_config.yaml").read_text()
    assert files_holding(run, SECRET) == [] and files_holding(tmp_path / "wandb_home", SECRET) == []
    assert SECRET not in out.getvalue() + capsys.readouterr().err


def test_job_folder_names_never_hold_a_secret():
    from agentcredit.run.sweep import job_dirname

    assert job_dirname("credit.K:1+credit:trace") == "credit.K:1+credit:trace"
    assert job_dirname(f"judge.apiKey:x+seed:1+extra.note:{LEAK}") == "judge.apiKey:redacted+seed:1+extra.note:redacted"


def test_a_real_sweep_command_with_a_secret_in_an_experiment_file_writes_nothing(tmp_path):
    """As a user types it (a subprocess, the default output folders under its working directory): the
    probe's --config-dir case under -m, where Hydra had copied the key into .hydra/config.yaml."""
    from tiny_runs import cli

    conf = experiment_file(tmp_path, f"# @package _global_\nextra:\n  accessToken: {LEAK}\n")
    work = tmp_path / "work"
    work.mkdir()
    done = cli("train.py", "-m", "--config-dir", conf, "experiment=leaky", "seed=0,1", *TINY, "trainer.max_steps=1",
               cwd=work, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "extra.accessToken holds a secret in" in lines[0], done.stderr[-2000:]
    assert LEAK not in done.stdout + done.stderr and list(work.iterdir()) == []


def test_one_command_line_is_composed_once_for_every_check_inside_one_composition(monkeypatch):
    """Inside `one_composition()` the secret check, the composition check and the run folder's checks read one
    composition (each is a whole Hydra config load); outside it every call composes again, and a strict reader
    gets the kept composition error each time."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from agentcredit.checks import secret_check
    from agentcredit.common.configs import register_config_nodes

    register_config_nodes()
    loads = []
    real = ConfigLoaderImpl.load_configuration
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", lambda self, *a, **k: loads.append(a[1]) or real(self, *a, **k))

    def configs(args, strict=False):
        return list(secret_check.composed_configs(args, str(ROOT / "train.py"), "src/agentcredit/conf", "config", strict))

    with secret_check.one_composition():
        first = configs(["credit=trace"])
        assert configs(["credit=trace"]) == first and len(loads) == 1
        assert len(configs(["-m", "seed=0,1"])) == 3 and len(loads) == 4  # the sweep's config and its 2 jobs
        assert configs(["credit=nosuch"]) == [] and len(loads) == 5  # passed over by the secret check ...
        for _ in range(2):  # ... and raised to the composition check, from the one composition
            with pytest.raises(Exception, match="Could not find 'credit/nosuch'"):
                configs(["credit=nosuch"], strict=True)
        assert len(loads) == 5
    configs(["credit=trace"])
    assert len(loads) == 6
