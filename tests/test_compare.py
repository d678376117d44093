"""scripts/compare.py and scripts/view_credit.py: statistics by hand, a real tiny sweep's report, its export
and regeneration, and the credit viewer on real and hand-made samples."""

import json

import pytest

from agentcredit.analysis.comparison import Run, markdown_report, mean_ci, paired, read_runs, run_metrics
from tiny_runs import ROOT, TINY, cli, hydra_cli


def _run(arm, seed, acc, rewards, extra=None, group=None):
    steps = {s: {"train/reward": r} for s, r in enumerate(rewards)}
    for s, (e, g) in enumerate(zip(extra or [], group or [])):
        steps[s].update({"credit/extra_tokens": e, "credit/group_tokens": g})
    return Run(f"{arm}{seed}", arm, seed, {"test/accuracy": acc}, steps)


def test_statistics_by_hand():
    # mean 0.2, sample sd 0.1, t(0.975, 2) = 4.302653 (scipy.stats.t): half-width 4.302653 · 0.1 / √3 = 0.248414
    mean, half = mean_ci([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2) and half == pytest.approx(0.248414, abs=1e-6)
    assert mean_ci([0.4]) == (0.4, None)
    grpo = [_run("grpo", s, a, [0.1, 0.3]) for s, a in enumerate([0.10, 0.20, 0.30])]
    prover = [_run("prover", s, a, [0.2, 0.4], [30, 10], [100, 100]) for s, a in enumerate([0.15, 0.20, 0.40])]
    # differences 0.05, 0.0, 0.1: mean 0.05, sd 0.05 → half 4.302653 · 0.05/√3 = 0.124207; two wins, one tie
    diff = paired(prover, grpo, "test_accuracy")
    assert diff["mean"] == pytest.approx(0.05) and diff["ci"] == pytest.approx(0.124207, abs=1e-6)
    assert (diff["wins"], diff["ties"], diff["n"]) == (2, 1, 3)
    # 80% power at α = 0.05: (t_0.975 + t_0.80 at 2 df) · sd / √n = (4.302653 + 1.060660) · 0.05 / √3 = 0.154826
    assert diff["detectable"] == pytest.approx(0.154826, abs=1e-6)
    metrics = run_metrics(prover[0])
    assert metrics["reward_auc"] == pytest.approx(0.3) and metrics["extra_token_overhead"] == pytest.approx(0.2)
    report = markdown_report(grpo + prover)
    # no budget_grpo: the reference is grpo. Paired t p = 0.225403 (t = √3 on 2 df, tests/test_comparison_stats.py),
    # sign test 2 of 2 nonzero = 0.5; one arm, so Holm leaves p as it is; +5 points is outside ±2: inconclusive
    assert "| prover | 3 | 25.0 ± " in report and "Verdicts against grpo" in report
    assert "| 2/3 (0.5) | 0.225 | 0.225 | 0.796 | 15.5 | 0.100 ± 0.000 | inconclusive |" in report


def test_the_critic_fit_table_by_hand():
    from agentcredit.analysis.comparison import CRITIC_LAST_STEPS, critic_fit, critic_fit_lines

    def critic_run(seed, ev):  # ev: the explained variance logged at each step
        run = _run("turn_critic", seed, 0.3, [0.1] * len(ev))
        for step, value in enumerate(ev):
            run.steps[step]["credit/critic_explained_var"] = value
        return run

    n = CRITIC_LAST_STEPS
    # seed 0: 0.5 over the first 100 steps, 0.1 over the last 100: median 0.3 over all (the two middle values
    # 0.1 and 0.5), 0.1 over the last 100. seed 1: 0.0 but one step of -50 (targets that barely varied): median 0.0
    # either way, where a mean would be -0.25 and -0.5. Mean of the seeds 0.15 and 0.05, sd 0.2121 and 0.0707,
    # t(0.975, 1) = 12.706205
    runs = [critic_run(0, [0.5] * n + [0.1] * n), critic_run(1, [0.0] * (2 * n - 1) + [-50.0])]
    assert critic_fit(runs[0]) == pytest.approx(0.3) and critic_fit(runs[0], n) == pytest.approx(0.1)
    assert critic_fit(runs[1]) == 0.0 and critic_fit(runs[1], n) == 0.0
    lines = critic_fit_lines({"turn_critic": runs, "grpo": [_run("grpo", 0, 0.3, [0.1])]})
    assert "| turn_critic | 2 | 0.150 ± 1.906 | 0.050 ± 0.635 |" in lines  # 12.706205 · 0.2121 / √2 = 1.906
    assert not any(line.startswith("| grpo") for line in lines)  # no critic: no row
    assert critic_fit_lines({"grpo": [_run("grpo", 0, 0.3, [0.1])]}) == []  # and no section


def test_report_of_a_real_sweep_exports_and_regenerates(tiny_sweep, tmp_path):
    sweep, _ = tiny_sweep
    runs, left_out = read_runs(sweep)
    assert left_out == []
    assert sorted(r.arm for r in runs) == ["grpo", "trace"] and all("test/accuracy" in r.test for r in runs)
    exported = tmp_path / "results"
    result = cli("scripts/compare.py", str(sweep), "--export", str(exported), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "report" / "learning_curves.png").stat().st_size > 10_000
    assert sorted(p.name for p in exported.glob("*.summary.json")) == ["grpo_seed0.summary.json", "trace_seed0.summary.json"]
    again = cli("scripts/compare.py", str(exported), "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "compare.md").read_text() == (tmp_path / "report" / "compare.md").read_text()
    assert "| trace | 1 |" in (tmp_path / "again" / "compare.md").read_text()


def test_viewer_on_a_real_trace_run(tiny_sweep, tmp_path):
    sweep, _ = tiny_sweep
    run = next(p for p in sweep.iterdir() if "credit:trace" in p.name)
    result = cli("scripts/view_credit.py", str(run), "--out", str(tmp_path / "view.html"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "view.html").read_text()
    records = [json.loads(line) for line in (run / "credit_samples.jsonl").read_text().splitlines()]
    assert "TRACE δ" in page and "credit=trace" in page and page.count('class="card"') == len(records)
    assert "<script" not in page and "http" not in page.split("<body>")[0]  # self-contained


def test_viewer_highlights_a_verified_segment_and_chain_segments(tmp_path):
    base = {"question_id": "q1", "question": "Who founded X?", "gold_answer": "Ada", "step": 4, "reward": 1.1,
            "finish_reason": "answer", "num_tool_turns": 3, "group_rewards": [1.1, 0.1, 0.0], "rollout": 0,
            "turns": ['{"name": "browser.search"}', '{"name": "browser.open"}', '{"name": "browser.open"}',
                      "<answer>Ada</answer>"],
            "observations": ["Search results: ...", "[cursor 0] X", "[cursor 1] Ada <b>"],
            "turn_advantages": [0.4, 0.9, 0.9], "answer_advantage": 0.4}
    prover = {**base, "segment": [1, 2, 0.5]}
    spo = {**base, "rollout": 1, "chain_boundaries": [2, 3], "chain_values": [0.25, 0.75],
           "segment_advantages": [-0.15, 0.5, 0.35]}
    gigpo = {**base, "rollout": 2, "step_advantages": [0.0, 1.0, -1.0, 0.0], "anchor_sizes": [3, 2, 2, 1]}
    (tmp_path / "credit_samples.jsonl").write_text("\n".join(json.dumps(r) for r in (prover, spo, gigpo)) + "\n")
    assert cli("scripts/view_credit.py", str(tmp_path), cwd=tmp_path).returncode == 0
    page = (tmp_path / "credit_view.html").read_text()
    assert page.count("<tr class=seg>") == 2 and "turns 1–2, Δ = +0.500" in page
    assert "SPO seg (A_j)" in page and "2: +0.500" in page and "3: +0.350" in page
    assert "GiGPO A^S" in page and "anchor size" in page
    assert "Ada &lt;b&gt;" in page  # observations are escaped


@pytest.mark.slow
def test_shrunk_comparison_runs_every_arm_and_reports(tmp_path):
    sweep = tmp_path / "compare"
    shrink = [o for o in TINY if not o.startswith(("logger", "trainer.max_steps", "trainer.val_check"))]
    hydra_cli("-m", "experiment=compare", *shrink, "logger=csv", "trainer.max_steps=1", "trainer.val_check_interval=1",
              "seed=0", f"hydra.sweep.dir={sweep}")
    runs, left_out = read_runs(sweep)
    assert left_out == []
    assert sorted(r.arm for r in runs) == ["budget_grpo", "grpo", "prover_heuristic", "prover_random", "trace"]
    result = cli("scripts/compare.py", str(sweep), cwd=ROOT)
    assert result.returncode == 0 and (sweep / "learning_curves.png").exists()


# ------------------------------------------------------------------ damaged and unfinished runs (issue 30, item 4)

def compare_main():
    import runpy

    return runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]


HEADER = "step,train/reward,rollout/generated_tokens\n"
ROWS = HEADER + "0,0.5,100\n1,0.7,120\n"


def _write_run(folder, name, metrics=ROWS, summary='{"test/accuracy": 0.5, "arm": "grpo", "seed": 0}',
               config="credit:\n  name: grpo\nseed: 0\n"):
    run = folder / name
    run.mkdir(parents=True)
    (run / "metrics.csv").write_bytes(metrics if isinstance(metrics, bytes) else metrics.encode())
    for file, text in (("test_summary.json", summary), ("resolved_config.yaml", config)):
        if text is not None:
            (run / file).write_bytes(text if isinstance(text, bytes) else text.encode())
    return run


DAMAGED_RUNS = {
    "truncated test_summary.json": ({"summary": '{"test/accuracy": 0.5, "ar'}, "test_summary.json: not a readable record"),
    "test_summary.json a list": ({"summary": "[0.5]"}, "test_summary.json: record: Input should be a valid dictionary"),
    "test_summary.json not UTF-8": ({"summary": b"\xff\xfe"}, "test_summary.json: cannot be read (UnicodeDecodeError)"),
    "test accuracy a string": ({"summary": '{"test/accuracy": "high", "arm": "grpo"}'}, "test_summary.json: test/accuracy: Input should be a valid number"),
    "seed a word": ({"summary": '{"test/accuracy": 0.5, "seed": "one"}'}, "test_summary.json: seed: Input should be a valid integer"),
    "broken resolved_config.yaml": ({"config": "credit: [unclosed\n"}, "resolved_config.yaml: unreadable (ParserError)"),
    "resolved_config.yaml a list": ({"config": "- a\n"}, "resolved_config.yaml: not a run's resolved config"),
    "0-byte metrics.csv": ({"metrics": ""}, "cut short, no training step logged"),
    "header-only metrics.csv": ({"metrics": HEADER}, "cut short, no training step logged"),
    "killed before the test": ({"summary": None}, "cut short, no held-out test result (last logged step 1"),
    "garbage in metrics.csv": ({"metrics": HEADER + "0,abc,1\n"}, "metrics.csv:2: values.train/reward: Input should be a valid number"),
    "binary metrics.csv": ({"metrics": b"\xff\x00\xfe"}, "metrics.csv: not UTF-8 text"),
}


@pytest.mark.parametrize("case", DAMAGED_RUNS)
def test_a_damaged_or_unfinished_run_is_left_out_with_a_warning(tmp_path, capsys, case):
    main = compare_main()
    damage, warning = DAMAGED_RUNS[case]
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good", summary='{"test/accuracy": 0.5, "arm": "grpo", "seed": 0}')
    _write_run(sweep, "b_bad", **damage)
    assert main([str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"[compare] warning: {sweep / 'b_bad'}") and warning in err
    report = (sweep / "compare.md").read_text()
    assert "| grpo | 1 | 50.0 |" in report and "Left out of this comparison" in report and warning in report
    assert "1 runs (1 left out)" in out


def test_no_finished_run_is_one_line(tmp_path, capsys):
    main = compare_main()
    _write_run(tmp_path / "sweep", "a", metrics="")
    with pytest.raises(SystemExit, match=r"^compare: no finished run to compare \(1 left out"):
        main([str(tmp_path / "sweep")])
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "grpo_seed0.summary.json").write_text('{"name": "x"')
    with pytest.raises(SystemExit, match="no finished run"):
        main([str(exported)])
    assert "grpo_seed0.summary.json: not a readable record" in capsys.readouterr().err


def test_detectable_difference_by_hand():
    from scipy import stats

    from agentcredit.analysis.comparison import detectable_difference

    # 5 seeds, paired sd 2 points: the effect size a paired t-test of 5 pairs detects with 80% power at α = 0.05
    # (two-sided) is d = 1.6820 (power tables; the normal-shift approximation gives 1.6625), so 2 · 1.6820
    assert detectable_difference(2.0, 5) == pytest.approx(3.3640, abs=1e-3)
    assert detectable_difference(1.0, 2) == pytest.approx(11.5499, abs=1e-3)  # 1 df: 16% above the approximation
    # the definition itself: at that difference the noncentral t (df n − 1, noncentrality Δ/sd · √n) lands
    # beyond ±t_0.975 with probability 0.8
    for n, sd in ((2, 3.0), (5, 2.0), (11, 1.0), (40, 1.0)):
        delta = detectable_difference(sd, n)
        crit, nc = stats.t.ppf(0.975, n - 1), delta / sd * n ** 0.5
        power = stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)
        assert power == pytest.approx(0.8, abs=1e-6)
    assert detectable_difference(1.0, 1) is None
