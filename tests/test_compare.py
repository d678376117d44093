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
    # 80% power at α = 0.05 with 3 pairs: effect size d = 3.264044 (the noncentral t at 2 df; the normal-shift
    # shortcut (4.302653 + 1.060660) / √3 = 3.096510 is 5% lower), times sd 0.05 = 0.163202
    assert diff["detectable"] == pytest.approx(0.163202, abs=1e-6)
    metrics = run_metrics(prover[0])
    assert metrics["reward_auc"] == pytest.approx(0.3) and metrics["extra_token_overhead"] == pytest.approx(0.2)
    report = markdown_report(grpo + prover)
    # no budget_grpo: the reference is grpo. Paired t p = 0.225403 (t = √3 on 2 df, tests/test_comparison_stats.py),
    # sign test 2 of 2 nonzero = 0.5; one arm, so Holm leaves p as it is; +5 points is outside ±2: inconclusive
    assert "| prover | 3 | 25.0 ± " in report and "Verdicts against grpo" in report
    assert "| 2/3, 1 tied (0.5) | 0.225 | 0.225 | 0.796 | 16.3 | 0.100 ± 0.000 | inconclusive |" in report


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
    assert sorted(r.arm for r in runs) == ["grpo", "trace+credit.K:1"] and all("test/accuracy" in r.test for r in runs)
    exported = tmp_path / "results"
    result = cli("scripts/compare.py", str(sweep), "--export", str(exported), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "report" / "learning_curves.png").stat().st_size > 10_000
    assert sorted(p.name for p in exported.glob("*.summary.json")) == ["grpo_seed0.summary.json",
                                                                       "trace+credit.K=1_seed0.summary.json"]
    again = cli("scripts/compare.py", str(exported), "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "compare.md").read_text() == (tmp_path / "report" / "compare.md").read_text()
    assert "| trace+credit.K:1 | 1 |" in (tmp_path / "again" / "compare.md").read_text()


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


def test_seeds_to_detect_the_margin_by_hand():
    import numpy as np
    from scipy import stats

    from agentcredit.analysis.comparison_stats import seeds_to_detect

    def power(n, d):  # the paired t-test's power at n pairs and effect size d (noncentral t, df n − 1)
        crit, nc = stats.t.ppf(0.975, n - 1), d * n ** 0.5
        return stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)

    # paired sd 3.5 points, margin 2: d = 0.571; the normal approximation (1.960 + 0.842)² / d² = 24.0, and the
    # t-test needs a few pairs more: power 0.7996 at 26, 0.8154 at 27
    assert seeds_to_detect(3.5, 2.0) == 27
    assert seeds_to_detect(2.0, 2.0) == 10 and seeds_to_detect(1.0, 2.0) == 5
    for sd in (0.7, 1.0, 2.0, 3.5, 8.0):  # the definition: the fewest pairs whose power reaches 0.8
        n = seeds_to_detect(sd, 2.0)
        assert power(n, 2.0 / sd) >= 0.8 > power(n - 1, 2.0 / sd)
    # a spread far below the margin (2 or 3 seeds that happened to agree): a few seeds, where a root finder fails
    # (scipy's noncentral t gives NaN this far out, so the power is simulated: paired t-tests on normal draws)
    rng = np.random.default_rng(0)

    def simulated_power(n, sd):
        draws = rng.normal(2.0, sd, size=(200_000, n))
        t = draws.mean(1) / (draws.std(1, ddof=1) / n ** 0.5)
        return float(np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)))

    for sd in (0.5, 0.3):  # 2 seeds: power about 0.34 and 0.54; 3 seeds: about 0.91 and 0.999
        assert seeds_to_detect(sd, 2.0) == 3
        assert simulated_power(3, sd) >= 0.8 > simulated_power(2, sd)
    # effect 20 and beyond: at 2 seeds the noncentrality 20·√2 = 28 lies far past the critical t of 12.7 (1 df)
    assert seeds_to_detect(0.1, 2.0) == 2 and seeds_to_detect(1e-15, 2.0) == 2
    for sd in (0.0, None, float("nan"), float("inf")):
        assert seeds_to_detect(sd, 2.0) is None
    assert seeds_to_detect(1.0, 0) is None and seeds_to_detect(1.0, float("nan")) is None


def test_the_share_of_the_seed_spread_that_the_test_questions_give_by_hand():
    import numpy as np

    from agentcredit.analysis.comparison_stats import question_share

    # seed 0 wins 2 of 4 questions outright, seed 1 ties all: per-seed means 50 and 0, so sd² = 1,250 (ddof 1);
    # within seed 0 the 4 differences vary by 10,000/3 (ddof 1), over 4 questions 833.3; within seed 1 by 0;
    # averaged 416.7, a third of 1,250
    diffs = np.array([[100.0, 0.0, 100.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert question_share(diffs, float(np.std([50.0, 0.0], ddof=1))) == pytest.approx(1 / 3)
    assert question_share(diffs, 1.0) == 1.0  # more than the whole (a noisy total of few seeds): capped
    assert question_share(diffs, None) is None and question_share(diffs, 0.0) is None
    assert question_share(diffs, float("nan")) is None and question_share(diffs * float("nan"), 1.0) is None
    assert question_share(np.array([[3.0], [1.0]]), 1.4) is None  # no per-question records


def test_the_report_says_how_many_seeds_the_margin_would_take():
    from agentcredit.analysis.comparison import seeds_needed_line
    from agentcredit.analysis.comparison_stats import Comparison

    def row(arm, needed, seeds):
        return Comparison(arm=arm, seeds=seeds, questions=None, diff=0.0, ci=None, ci_equivalence=None, wins=0,
                          sign_p=None, t_p=None, tost_p=None, detectable=None, seeds_for_margin=needed)

    line = seeds_needed_line([row("trace", 27, 4), row("igpo", None, 1), row("gigpo", 12_000, 3)], 2.0)[1]
    assert "detects a true difference of 2 points with 80% power after about trace 27, gigpo > 10,000 seeds" in line
    assert "estimated from 3–4 seeds" in line and " igpo" not in line
    # Holm's first step at α/3: ((z_0.99167 + z_0.8) / (z_0.975 + z_0.8))² = ((2.394 + 0.842) / 2.802)² = 1.334
    assert "correction across the 3 arms, which raises them by up to about 33%" in line
    assert seeds_needed_line([row("igpo", None, 1)], 2.0) == []
    from agentcredit.analysis.comparison import question_share_line

    shared = [row("trace", 27, 4), row("igpo", None, 1)]
    shared[0].question_share = 0.126
    assert "over test questions (each" in question_share_line(shared)[1]
    assert "is estimated at most trace 13%; at most" in question_share_line(shared)[1]
    assert question_share_line(shared[1:]) == []


# ------------------------------------------------------------------ runs there in part, repeats, outputs

VAL_ROWS = "step,train/reward,val/accuracy\n0,0.5,\n1,0.7,0.5\n2,0.6,\n3,0.8,1.0\n"  # validations after steps 2 and 4


def _write_val_outcomes(run, *steps):
    from agentcredit.records.outcomes import write_outcomes

    for step in steps:
        (run / "val_outcomes").mkdir(exist_ok=True)
        write_outcomes(run / "val_outcomes" / f"step{step:06d}.jsonl",
                       [{"id": "v1", "success": 1.0, "tool_calls": 1.0, "tokens": 5.0}])


def _no_metrics(sweep):
    (_write_run(sweep, "b", summary='{"test/accuracy": 0.4, "arm": "grpo", "seed": 1}') / "metrics.csv").unlink()
    return f"{sweep / 'b' / 'metrics.csv'}: missing (test_summary.json is there"


def _no_arm_or_seed(sweep):
    _write_run(sweep, "b", summary='{"test/accuracy": 0.4}', config=None)  # a restored folder holds no config
    return f"{sweep / 'b'}: no arm and no seed (test_summary.json names none and there is no resolved_config.yaml)"


def _a_seed_twice(sweep):
    _write_run(sweep, "b", summary='{"test/accuracy": 0.4, "arm": "grpo", "seed": 0}')
    return f"{sweep / 'b'} left out: grpo seed 0 a second time in the same folder; {sweep / 'a_good'} counts"


IN_PART = {"no metrics.csv": _no_metrics, "no arm or seed": _no_arm_or_seed, "a seed twice": _a_seed_twice}


@pytest.mark.parametrize("case", IN_PART)
def test_a_run_there_in_part_or_twice_is_named_under_the_report(tmp_path, capsys, case):
    main = compare_main()
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    warning = IN_PART[case](sweep)
    assert main([str(sweep), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("[compare] warning: ") and warning in err
    report = (sweep / "compare.md").read_text()
    assert "| grpo | 1 | 50.0 |" in report and warning in report.split("Left out of this comparison")[1]
    assert out.rstrip().endswith(f"1 runs (1 left out); wrote {sweep / 'compare.md'} and {sweep / 'learning_curves.png'}")


@pytest.mark.parametrize("config, arm", [
    ("recorded_arm: trace+credit.K:1\ncredit:\n  name: trace\nseed: 2\n", "trace+credit.K:1"),
    # started before runs recorded the name: its `arm=`, else its method
    ("arm: grpo_tuned\ncredit:\n  name: grpo\nseed: 2\n", "grpo_tuned"),
    ("credit:\n  name: prover\njudge:\n  kind: heuristic\nseed: 2\n", "prover_heuristic"),
])
def test_a_run_killed_between_its_test_and_its_summary_is_named_as_its_summary_would_have(tmp_path, config, arm):
    """Its test rows are in metrics.csv, its test_summary.json never written: the name comes from the config,
    which records the setting at the start, so one of a K sweep's runs does not pass for another (`trace`)."""
    from agentcredit.analysis.comparison_runs import read_run_folder

    run = _write_run(tmp_path, "killed", metrics=HEADER.replace("\n", ",test/accuracy\n") + "0,0.5,100,\n1,,,0.25\n",
                     summary=None, config=config)
    read = read_run_folder(run)
    assert (read.arm, read.seed, read.test["test/accuracy"]) == (arm, 2, 0.25)


def _a_validation_missing(run):
    (run / "val_outcomes" / "step000004.jsonl").unlink()
    return "val_outcomes holds the outcomes of 1 validation where metrics.csv logged 2; missing step000004.jsonl"


def _a_validation_damaged(run):
    (run / "val_outcomes" / "step000004.jsonl").write_text('{"id": "v1", "succ')
    return "step000004.jsonl"


@pytest.mark.parametrize("damage", [_a_validation_missing, _a_validation_damaged])
def test_a_run_whose_validations_are_missing_or_damaged_keeps_its_test_result_and_loses_its_curve(
        tmp_path, capsys, damage):
    """Before, the whole run was left out: one damaged validation file cost the arm a seed of its test verdicts."""
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    for seed in (0, 1):
        _write_val_outcomes(_write_run(sweep, f"trace{seed}", metrics=VAL_ROWS, summary='{"test/accuracy": 0.4, '
                                       f'"arm": "trace", "seed": {seed}}}'), 2, 4)
    why = damage(sweep / "trace1")
    assert compare_main()([str(sweep), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"{sweep / 'trace1'}: held-out learning curve left out (" in err
    assert why in err and err.rstrip().endswith("; its test result counts")
    assert out.rstrip().endswith(f"3 runs; wrote {sweep / 'compare.md'} and {sweep / 'learning_curves.png'}")  # none left out
    report = (sweep / "compare.md").read_text()
    assert "| trace | 2 | 40.0 ± 0.0 |" in report  # both seeds in the test table
    assert "| trace (1 of 2 seeds) | 100.0 | 100.0 |" in report  # the curve: seed 0's validations alone
    assert "Left out of this comparison" not in report
    assert report.split("Counted without their held-out learning curves:")[1].count("\n- ") == 1


def test_a_refreshed_export_keeps_the_validations_a_damaged_copy_could_not_give(tmp_path, capsys):
    """The sweep's copy of a run lost a validation file; refreshing the committed export from the sweep must not
    delete the export's intact copy of them (the documented refresh: the sweep folder first, the export second)."""
    sweep, exported = tmp_path / "sweep", tmp_path / "exported"
    _write_run(sweep, "a_good")
    _write_val_outcomes(_write_run(sweep, "trace0", metrics=VAL_ROWS, summary='{"test/accuracy": 0.4, "arm": "trace", '
                                   '"seed": 0}'), 2, 4)
    assert compare_main()([str(sweep), "--export", str(exported), "--bootstrap", "200"]) == 0
    curve = exported / "trace_seed0.val_outcomes"
    intact = sorted((p.name, p.read_bytes()) for p in curve.iterdir())
    _a_validation_damaged(sweep / "trace0")
    capsys.readouterr()
    assert compare_main()([str(sweep), str(exported), "--export", str(exported), "--bootstrap", "200"]) == 0
    assert sorted((p.name, p.read_bytes()) for p in curve.iterdir()) == intact
    assert f"kept: {curve} (that run's validation outcomes could not be read this time" in capsys.readouterr().err
    assert compare_main()([str(exported), "--out", str(tmp_path / "again"), "--bootstrap", "200"]) == 0
    assert "| trace | 100.0 | 100.0 |" in (tmp_path / "again" / "compare.md").read_text()  # the export's curve, whole


def test_a_run_with_every_validation_file_is_kept(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    _write_val_outcomes(_write_run(sweep, "b", metrics=VAL_ROWS, summary='{"test/accuracy": 0.4, "arm": "trace", '
                                   '"seed": 0}'), 2, 4)
    assert compare_main()([str(sweep), "--bootstrap", "200"]) == 0
    assert capsys.readouterr().err == "" and "| trace | 1 |" in (sweep / "compare.md").read_text()


def test_a_seed_in_two_folders_counts_once_and_the_later_is_named(tmp_path, capsys):
    first, later = tmp_path / "first", tmp_path / "later"
    _write_run(first, "a_good")
    _write_run(later, "x", summary='{"test/accuracy": 0.9, "arm": "grpo", "seed": 0}')
    assert compare_main()([str(first), str(later), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    line = f"{later / 'x'} left out: grpo seed 0 again; {first / 'a_good'}, of a folder named earlier, counts"
    assert err == f"[compare] warning: {line}\n" and f"- {line}\n" in (first / "compare.md").read_text()
    assert "| grpo | 1 | 50.0 |" in (first / "compare.md").read_text() and "1 runs (1 left out)" in out


def test_a_folder_named_twice_is_read_once(tmp_path, capsys):
    """Read twice, each run was left out as a second run of itself, naming one path both ways."""
    first = tmp_path / "first"
    _write_run(first, "a_good")
    assert compare_main()([str(first), str(tmp_path / "." / "first"), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert err == f"[compare] {tmp_path / 'first'} is named twice; read once\n"
    assert "| grpo | 1 | 50.0 |" in (first / "compare.md").read_text() and "Left out" not in (first / "compare.md").read_text()


def test_refreshing_an_export_from_its_sweep_reads_each_job_once_and_leaves_none_out(tmp_path, capsys):
    sweep, export = tmp_path / "sweep", tmp_path / "export"
    _write_run(sweep, "a_good")
    _write_run(sweep, "b", summary='{"test/accuracy": 0.4, "arm": "trace", "seed": 0}')
    assert compare_main()([str(sweep), "--export", str(export), "--bootstrap", "200"]) == 0
    capsys.readouterr()
    # docs/tuning.md's refresh: the sweep, then its export; the export's runs are the same jobs, not second seeds
    assert compare_main()([str(sweep), str(export), "--export", str(export), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "Left out" not in (export / "compare.md").read_text()
    assert f"[compare] 2 of the runs in {export} are jobs read from a folder named earlier (the same job " in out
    assert out.rstrip().endswith(f"2 runs; wrote {export / 'compare.md'} and {export / 'learning_curves.png'}")


def test_an_export_without_its_steps_file_is_named_as_such(tmp_path, capsys):
    from agentcredit.analysis.comparison import export_runs

    export = tmp_path / "export"
    export_runs([_run("grpo", 0, 0.5, [0.1, 0.2]), _run("trace", 0, 0.4, [0.1, 0.2])], export)
    (export / "trace_seed0.steps.csv").unlink()
    assert compare_main()([str(export), "--bootstrap", "200"]) == 0
    err = capsys.readouterr().err
    assert err == (f"[compare] warning: {export / 'trace_seed0.summary.json'} left out: "
                   f"{export / 'trace_seed0.steps.csv'}: missing (the exported run's training log)\n")


def test_an_exported_accuracy_outside_0_1_is_left_out_in_one_line(tmp_path, capsys):
    """Averaged in, an accuracy of 7.5 would be reported as 750%."""
    from agentcredit.analysis.comparison import export_runs

    export = tmp_path / "export"
    export_runs([_run("grpo", 0, 0.5, [0.1, 0.2]), _run("trace", 0, 0.4, [0.1, 0.2])], export)
    summary = export / "trace_seed0.summary.json"
    summary.write_text(summary.read_text().replace('"test/accuracy": 0.4', '"test/accuracy": 7.5'))
    assert compare_main()([str(export), "--bootstrap", "200"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"[compare] warning: {summary} left out: {summary}: test: ") and len(err.splitlines()) == 1
    assert "test/accuracy 7.5: input should be less than or equal to 1" in err
    assert "750" not in (export / "compare.md").read_text()


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_refresh_keeps_the_files_of_runs_left_out_and_drops_only_stale_ones(tmp_path, capsys):
    from agentcredit.analysis.comparison import export_runs

    export = tmp_path / "export"
    export_runs([_run("grpo", 0, 0.5, [0.1, 0.2]), _run("trace", 0, 0.4, [0.1, 0.2])], export)
    (export / "trace_seed0.steps.csv").write_text("step,train/reward\n0,0.1\n1,0.")  # cut short by a kill
    for suffix in (".summary.json", ".steps.csv"):  # the same run twice: an older export's numbered repeat
        (export / f"grpo_seed0_1{suffix}").write_bytes((export / f"grpo_seed0{suffix}").read_bytes())
    (export / "gone_seed3.steps.csv").write_text("step,train/reward\n0,0.1\n")  # its summary is gone: no run
    left_out = {p: b for p, b in _snapshot(export).items() if p.name.startswith(("trace_seed0", "grpo_seed0_1"))}
    assert compare_main()([str(export), "--export", str(export), "--bootstrap", "200"]) == 0
    err = capsys.readouterr().err
    for stem in ("grpo_seed0_1", "trace_seed0"):
        assert f"[compare] kept: {export / stem}.* (that run was left out this time" in err
    after = _snapshot(export)
    assert all(after.get(p) == b for p, b in left_out.items())  # byte for byte
    assert not (export / "gone_seed3.steps.csv").exists() and (export / "grpo_seed0.summary.json").exists()
    report = (export / "compare.md").read_text()
    assert "grpo_seed0_1.summary.json left out: grpo seed 0 a second time in the same folder" in report


def test_a_reference_no_run_has_is_one_line_before_anything_is_written(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    _write_run(sweep, "b", summary='{"test/accuracy": 0.4, "arm": "trace", "seed": 0}')
    with pytest.raises(SystemExit) as stop:
        compare_main()([str(sweep), "--reference", "tracee", "--export", str(tmp_path / "export")])
    assert str(stop.value) == "compare: --reference tracee: no run of that arm; the runs' arms are grpo, trace"
    assert not (sweep / "compare.md").exists() and not (tmp_path / "export").exists()


def test_an_output_folder_that_cannot_be_written_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    import errno
    import tempfile

    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    _write_run(sweep, "b_bad", metrics="")  # read, it would warn: nothing is read
    real = tempfile.mkstemp

    def read_only(*args, dir=None, **kwargs):
        if str(dir).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    (tmp_path / "ro").mkdir()
    for option, path in (("--out", "ro"), ("--out", "ro/sub/deeper"), ("--export", "ro/export")):
        with pytest.raises(SystemExit) as stop:
            compare_main()([str(sweep), option, str(tmp_path / path)])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"cannot write into {tmp_path / 'ro'} (Read-only file system)" in err
        assert "[compare]" not in err and "Traceback" not in err
    assert list((tmp_path / "ro").iterdir()) == [] and not (sweep / "compare.md").exists()


def test_a_full_disk_leaves_the_older_report_and_picture_as_they_were(tmp_path, capsys, monkeypatch):
    import errno

    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    (sweep / "compare.md").write_text("older report")
    (sweep / "learning_curves.png").write_bytes(b"older picture")

    from agentcredit.records import files

    real_write = files.atomic_write_bytes

    def full_at_the_picture(path, data):  # the report is staged; the disk fills while the picture is written
        if path.name.startswith(".learning_curves.png"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full_at_the_picture)
    with pytest.raises(SystemExit) as stop:
        compare_main()([str(sweep), "--bootstrap", "200"])
    assert str(stop.value) == (f"compare: stopped writing into {sweep}: [Errno 28] No space left on device; its "
                               "compare.md and learning_curves.png are as they were")
    assert (sweep / "compare.md").read_text() == "older report"
    assert (sweep / "learning_curves.png").read_bytes() == b"older picture"
    assert sorted(p.name for p in sweep.iterdir()) == ["a_good", "compare.md", "learning_curves.png"]  # no temp file
    # a new --out that could not be filled is not left behind either
    with pytest.raises(SystemExit):
        compare_main()([str(sweep), "--out", str(tmp_path / "new" / "report"), "--bootstrap", "200"])
    assert not (tmp_path / "new").exists()


def _without_traceback(main, argv):
    try:
        return main(argv)
    except KeyboardInterrupt:  # raised on, it would stop the test session itself
        pytest.fail("Ctrl-C came out of compare as a KeyboardInterrupt traceback")


@pytest.mark.parametrize("stop", ["full disk", "Ctrl-C"])
def test_an_export_stopped_half_way_removes_what_it_made_and_reruns(tmp_path, capsys, monkeypatch, stop):
    import errno

    import agentcredit.analysis.comparison_runs as comparison_runs

    sweep, export = tmp_path / "sweep", tmp_path / "export"
    _write_run(sweep, "a_good")
    _write_run(sweep, "b", summary='{"test/accuracy": 0.4, "arm": "trace", "seed": 0}')
    real, calls = comparison_runs.atomic_write_text, []

    def fails_on_the_third_file(path, text):
        calls.append(path)
        if len(calls) == 3:  # the first run's two files are in place
            raise KeyboardInterrupt if stop == "Ctrl-C" else OSError(errno.ENOSPC, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(comparison_runs, "atomic_write_text", fails_on_the_third_file)
    if stop == "Ctrl-C":
        assert _without_traceback(compare_main(), [str(sweep), "--export", str(export), "--bootstrap", "200"]) == 130
        assert capsys.readouterr().err == "compare: interrupted; nothing was left half-written\n"
    else:
        with pytest.raises(SystemExit) as stopped:
            compare_main()([str(sweep), "--export", str(export), "--bootstrap", "200"])
        assert str(stopped.value) == (f"compare: export to {export} stopped: [Errno 28] No space left on device; "
                                      "the files it had made are removed")
    assert not export.exists() and not (sweep / "compare.md").exists()
    monkeypatch.setattr(comparison_runs, "atomic_write_text", real)
    assert compare_main()([str(sweep), "--export", str(export), "--bootstrap", "200"]) == 0  # the rerun works
    assert sorted(p.name for p in export.glob("*.summary.json")) == ["grpo_seed0.summary.json", "trace_seed0.summary.json"]


def test_ctrl_c_while_comparing_is_one_line_and_status_130(tmp_path, capsys, monkeypatch):
    import agentcredit.cli.compare as cli_compare

    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_compare, "markdown_report", interrupted)
    assert _without_traceback(compare_main(), [str(sweep)]) == 130
    assert capsys.readouterr().err == "compare: interrupted; nothing was left half-written\n"
    assert sorted(p.name for p in sweep.iterdir()) == ["a_good"]


def test_a_folder_name_that_is_not_utf8_is_printed_and_reported(tmp_path, capsys):
    import os

    sweep = tmp_path / os.fsdecode(b"sweep\xff")
    try:
        sweep.mkdir()
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes no such name")
    _write_run(sweep, "a_good")
    _write_run(sweep, "b_bad", metrics="")
    assert compare_main()([str(sweep), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert f"[compare] warning: {tmp_path}/sweep\\xff/b_bad left out: cut short" in err
    assert f"- {tmp_path}/sweep\\xff/b_bad left out" in (sweep / "compare.md").read_text()
    assert out.rstrip().endswith(f"wrote {tmp_path}/sweep\\xff/compare.md and {tmp_path}/sweep\\xff/learning_curves.png")


def test_a_job_folder_name_that_is_not_utf8_is_compared_but_not_exported(tmp_path, capsys):
    import os

    sweep, export = tmp_path / "sweep", tmp_path / "export"
    try:
        _write_run(sweep, os.fsdecode(b"job\xff"))
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes no such name")
    with pytest.raises(SystemExit) as stop:  # its summary would name a job folder no reader takes back
        compare_main()([str(sweep), "--export", str(export), "--bootstrap", "200"])
    assert str(stop.value).startswith(f"compare: export to {export} refused: job folder name 'job\\udcff' is not")
    assert not export.exists()
    assert compare_main()([str(sweep), "--bootstrap", "200"]) == 0 and "| grpo | 1 |" in (sweep / "compare.md").read_text()
