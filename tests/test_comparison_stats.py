"""The comparison's verdict statistics by hand (bootstrap, Holm, TOST, the verdict words), the per-question
outcome records, and a report from runs that kept them (bootstrap over seeds and questions, per hop count)."""

import numpy as np
import pytest

from agentcredit.analysis.comparison import (
    Run,
    VerdictSettings,
    export_runs,
    markdown_report,
    read_exported,
    read_runs,
    restore_finished,
    verdicts,
)
from agentcredit.analysis.comparison_stats import (
    bootstrap_means,
    holm,
    paired_t_p,
    percentile_interval,
    sign_test_p,
    tost_p,
    verdict,
    verdict_kind,
)
from agentcredit.records import RecordError
from agentcredit.records.outcomes import TEST_OUTCOMES, OutcomeRecord, read_outcomes, write_outcomes


# ------------------------------------------------------------------ bootstrap


def test_bootstrap_over_seeds_alone_by_hand():
    # default_rng(0).integers(3, size=(3, 3)) draws the seed rows [2, 1, 1], [0, 0, 0], [0, 0, 0] (the one
    # question column is then always 0): (60 + 20 + 20) / 3 = 33.333, then 10 and 10
    assert bootstrap_means(np.array([[10.0], [20.0], [60.0]]), 3, seed=0) == pytest.approx([100 / 3, 10, 10])


def test_bootstrap_over_seeds_and_questions_is_the_direct_resample():
    values = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]])  # (3 seeds, 4 questions)
    fast = bootstrap_means(values, 200, seed=7)
    rng = np.random.default_rng(7)
    # the docstring's draw order (one block, as 200 < BLOCK): every replicate's seed indices, then its questions'
    seeds, questions = rng.integers(3, size=(200, 3)), rng.integers(4, size=(200, 4))
    direct = [values[np.ix_(s, q)].mean() for s, q in zip(seeds, questions)]
    assert fast == pytest.approx(direct, abs=1e-12)
    # more replicates than one block: the blocks' draws follow one another from the same generator
    rng = np.random.default_rng(3)
    blocks = [(rng.integers(3, size=(n, 3)), rng.integers(4, size=(n, 4))) for n in (1000, 500)]
    direct = [values[np.ix_(s, q)].mean() for seeds, questions in blocks for s, q in zip(seeds, questions)]
    assert bootstrap_means(values, 1500, seed=3) == pytest.approx(direct, abs=1e-12)
    # each replicate is a mean of 3 × 4 zeros and ones: a multiple of 1/12
    assert np.allclose(fast * 12, np.round(fast * 12))
    # the replicates centre on the grand mean 7/12 (E[draw counts] = 1 on both levels)
    assert bootstrap_means(values, 20_000, seed=1).mean() == pytest.approx(7 / 12, abs=0.01)


def test_percentile_interval_by_hand():
    # numpy's linear quantile of 1..100 at 0.05: 1 + 0.05 · 99 = 5.95; at 0.95: 1 + 0.95 · 99 = 95.05
    assert percentile_interval(np.arange(1.0, 101.0), 0.90) == pytest.approx((5.95, 95.05))


# ------------------------------------------------------------------ tests and their correction


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 → 3 · 0.01 = 0.03; max(0.03, 2 · 0.03) = 0.06; max(0.06, 1 · 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # a comparison with no test stays in the family as p = 1: sorted 0.01, 0.04, 1 → 3 · 0.01 = 0.03;
    # max(0.03, 2 · 0.04) = 0.08; its own adjusted p is not reported
    assert holm([0.01, None, 0.04]) == [pytest.approx(0.03), None, pytest.approx(0.08)]
    assert holm([None]) == [None]


def test_paired_t_and_sign_test_by_hand():
    # differences 5, 0, 10: mean 5, sd 5, t = 5 / (5/√3) = √3 on 2 df; F_2(t) = 1/2 + t / (2√(2 + t²))
    # = 0.5 + 1.732051 / (2 · 2.236068) = 0.887298, p = 2 · (1 − 0.887298) = 0.225403
    assert paired_t_p([15, 20, 40], [10, 20, 30]) == pytest.approx(0.225403, abs=1e-6)
    assert paired_t_p([1, 2], [0, 1]) is None and paired_t_p([3], [1]) is None  # no spread; one pair
    # 5 of 5 wins alone: 2 · 0.5⁵ = 0.0625; 2 of 2 nonzero (a tie left out): 2 · 0.25 = 0.5
    assert sign_test_p([1, 2, 3, 4, 5]) == pytest.approx(0.0625) and sign_test_p([5, 0, 10]) == pytest.approx(0.5)


def test_tost_inside_and_outside_the_margin_by_hand():
    arm, ref = [1.5, 3.0, 2.5, 2.0], [1.0, 2.0, 1.0, 1.0]  # differences 0.5, 1, 1.5, 1
    # mean 1, sd √(0.5/3) = 0.408248, se 0.204124, 3 df; F_3(t) = 1/2 + (t/(√3(1 + t²/3)) + atan(t/√3)) / π.
    # Margin ±2: upper t = (1 − 2)/se = −√24, t²/3 = 8: F = 0.5 − (0.314270 + 1.230959)/π = 0.008138;
    # the lower one-sided p is far smaller (t = 3/se = 14.7), so TOST p = 0.008138: equivalent.
    assert tost_p(arm, ref, 2.0) == pytest.approx(0.008138, abs=2e-6)
    # Margin ±0.5: upper t = (1 − 0.5)/se = √6, t²/3 = 2: F = 0.5 + (0.471405 + 0.955317)/π = 0.954139: not.
    assert tost_p(arm, ref, 0.5) == pytest.approx(0.954139, abs=2e-6)


def test_verdict_words():
    # (Holm p, Holm TOST p, 95% interval, 90% interval) at margin 2, α = 0.05
    assert verdict(3.0, 0.01, 0.9, (1.0, 5.0), (1.5, 4.5), 2, 0.05) == "better"
    assert verdict(-3.0, 0.01, 0.9, (-5.0, -1.0), (-4.5, -1.5), 2, 0.05) == "worse"
    assert verdict(0.4, 0.36, 0.02, (-0.2, 1.0), (-0.1, 0.9), 2, 0.05) == "equivalent within ±2"
    # TOST passes, but the bootstrap interval leaves the margin (questions add spread): not equivalent
    assert verdict(0.4, 0.36, 0.02, (-2.5, 2.9), (-2.1, 2.4), 2, 0.05) == "inconclusive"
    # uncorrected p 0.025 becomes 0.05 under Holm: not shown, even with a seeds-only interval excluding 0
    assert verdict(-2.4, 0.0504, 1.0, (-3.6, -1.3), (-3.5, -1.4), 2, 0.05) == "inconclusive"
    # a test that passes but an interval that does not: no claim
    assert verdict(2.0, 0.01, 1.0, (-0.5, 4.0), (0.1, 3.5), 2, 0.05) == "inconclusive"
    assert verdict(1.0, 0.001, 0.01, (0.5, 1.5), (0.6, 1.4), 2, 0.05) == "better, within ±2"
    assert verdict(1.0, None, None, (0.5, 1.5), (0.6, 1.4), 2, 0.05) == "inconclusive"
    # the kind and the equivalence flag behind the words
    assert verdict_kind(1.0, 0.001, 0.01, (0.5, 1.5), (0.6, 1.4), 2, 0.05) == ("better", True)
    assert verdict_kind(0.4, 0.36, 0.02, (-0.2, 1.0), (-0.1, 0.9), 2, 0.05) == ("equivalent", True)
    assert verdict_kind(0.4, 0.36, 0.02, (-2.5, 2.9), (-2.1, 2.4), 2, 0.05) == ("inconclusive", False)
    assert verdict_kind(-3.0, 0.01, 0.9, (-5.0, -1.0), (-4.5, -1.5), 2, 0.05) == ("worse", False)


# ------------------------------------------------------------------ per-question records


def _outcomes(seed, accuracy_by_hops):
    """Deterministic records: for each hop count, 20 questions of which the first `round(20 · acc)` succeed."""
    records = []
    for hops, acc in accuracy_by_hops.items():
        for i in range(20):
            records.append(OutcomeRecord(id=f"h{hops}-{i}", hops=hops, template="BRIDGE_ENTITY",
                                         success=float(i < round(20 * acc)), tool_calls=10.0 + hops, tokens=900.0))
    return records


def _run(arm, seed, by_hops):
    outcomes = _outcomes(seed, by_hops)
    accuracy = sum(o.success for o in outcomes) / len(outcomes)
    return Run(f"{arm}{seed}", arm, seed, {"test/accuracy": accuracy}, {0: {"train/reward": 0.3}}, outcomes)


def test_outcome_records_refuse_damage(tmp_path):
    path = tmp_path / TEST_OUTCOMES
    write_outcomes(path, [{"id": "q1", "hops": 4, "success": 1.0, "tool_calls": 12, "tokens": 800},
                          {"id": "q2", "hops": None, "success": 0.5, "samples": 2, "tool_calls": 9, "tokens": 700}])
    assert [(o.id, o.hops, o.success, o.samples) for o in read_outcomes(path)] == [("q1", 4, 1.0, 1), ("q2", None, 0.5, 2)]
    good = path.read_text()
    for damaged, why in ((good + good.splitlines()[0] + "\n", "question 'q1' a second time"),
                         (good.replace('"success": 1.0', '"success": true'), "a true/false"),
                         (good.replace('"success": 1.0', '"success": 1.5'), "less than or equal to 1"),
                         (good[:-5], "cut short"), ("", "no question")):
        path.write_text(damaged)
        with pytest.raises(RecordError, match=why):
            read_outcomes(path)


def test_report_with_records_bootstraps_questions_and_gives_verdicts_per_hop(tmp_path):
    runs = []
    for seed in range(4):
        jitter = 0.05 * (seed % 2)  # a seed effect shared by every arm
        runs += [_run("grpo", seed, {4: 0.40 + jitter, 5: 0.20, 6: 0.05}),
                 _run("budget_grpo", seed, {4: 0.60 + jitter, 5: 0.30 + 0.05 * (seed == 3), 6: 0.05}),
                 _run("trace", seed, {4: 0.40 + jitter + 0.05 * (seed == 0), 5: 0.20, 6: 0.05})]
    settings = VerdictSettings(n_boot=500)
    found = verdicts(runs, settings)
    assert sorted(found, key=str) == [4, 5, 6, None]  # all questions, then each hop count
    overall = {c.arm: c for c in found[None]}
    assert set(overall) == {"grpo", "trace"} and overall["grpo"].questions == 60 and overall["grpo"].seeds == 4
    # grpo − budget_grpo over 60 questions: 4-hop −4 of 20 on every seed, 5-hop −2 (−3 on seed 3) of 20:
    # (−6 · 3 − 7) / 4 seeds / 60 questions = −0.104167, i.e. −10.4 points
    assert overall["grpo"].diff == pytest.approx(-100 * 25 / 240) and overall["grpo"].verdict == "worse"
    assert {c.arm: c.questions for c in found[6]} == {"grpo": 20, "trace": 20}
    report = markdown_report(runs, settings)
    # grpo: 8 or 9 of 20 (4 hops) + 4 + 1 of 20 a seed, 13.5 of 60 on average = 22.5%
    assert "Verdicts against budget_grpo" in report and "| grpo | 22.5 [" in report
    assert ", 4 seeds × 60 questions | 4 seeds × 60 questions | -10.4 [" in report
    assert "By hop count" in report and "| 6 | trace | 4 seeds × 20 questions |" in report
    assert "Bootstrap over seeds and questions" in report
    # the same runs without records: the seeds alone, labelled so, and no hop table
    bare = [Run(r.name, r.arm, r.seed, r.test, r.steps) for r in runs]
    bare_report = markdown_report(bare, settings)
    assert ", 4 seeds | 4 seeds | -10.4 [" in bare_report and "Bootstrap over seeds alone" in bare_report
    assert "By hop count" not in bare_report
    assert "Verdicts against grpo" in markdown_report(runs, VerdictSettings(reference="grpo", n_boot=500))


def test_a_difference_over_fewer_seeds_than_the_reference_names_them_ties_and_the_holm_family(tmp_path):
    # the reference ran seeds 0 and 1 (40% and 60%: its row reads 50%); "one" ran seed 1 only and tied it; "two"
    # ran both seeds: only "two" has a paired t p, so Holm's family is 1 of the 2 arms compared
    runs = [_run("budget_grpo", 0, {4: 0.40}), _run("budget_grpo", 1, {4: 0.60}),
            _run("one", 1, {4: 0.60}), _run("two", 0, {4: 0.50}), _run("two", 1, {4: 0.65})]
    settings = VerdictSettings(n_boot=200)
    found = {c.arm: c for c in verdicts(runs, settings)[None]}
    assert found["one"].paired_seeds == (1,) and found["one"].reference_mean == pytest.approx(60.0)
    assert found["one"].ties == 1 and found["one"].wins == 0 and found["one"].diff == pytest.approx(0.0)
    assert found["two"].paired_seeds == (0, 1) and found["two"].ties == 0 and found["two"].wins == 2
    report = markdown_report(runs, settings)
    assert ", 1 seed × 20 questions | 1 seed × 20 questions: seed 1, where budget_grpo scored 60.0 | 0.0 [" in report
    assert "| 0/1, 1 tied (–) |" in report  # a tie is neither a win nor a loss, and the sign test has nothing to test
    assert "| 4 | one | 1 seed × 20 questions: seed 1, where budget_grpo scored 60.0 |" in report
    assert "| 0/1, 1 tied | – |" in report
    assert "| two | 57.5 [" in report and "2 seeds × 20 questions | 2 seeds × 20 questions | 7.5 [" in report
    assert ("Holm across the 2 arms compared with budget_grpo (1 without a paired t p, from fewer than two paired "
            "seeds or differences that do not vary, counts as p = 1 and can only be inconclusive)") in report
    assert ("Holm across the arms within each hop count, not across hop counts; an arm without a paired t p counts "
            "as p = 1") in report
    assert "(S − 1)/S of the seed-to-seed variance" in report
    # their Δ rest on the reference's 60.0 (seed 1) and 50.0 (seeds 0, 1): the rows do not rank the arms
    assert ("The differences pair over different seeds (seed 1: one; seeds 0, 1: two), and budget_grpo scored "
            "differently on each set") in report


def test_a_difference_over_fewer_seeds_than_the_arm_ran_names_them_and_both_sides_scores_on_them():
    # the reference ran seeds 0 and 1 (40%, 60%); "three" ran seeds 0-2 (50%, 70%, 20%: its row reads 46.7%), so
    # its difference pairs over seeds 0 and 1 only: 60% there against the reference's 50%, +10 points
    runs = [_run("budget_grpo", 0, {4: 0.40}), _run("budget_grpo", 1, {4: 0.60}),
            _run("three", 0, {4: 0.50}), _run("three", 1, {4: 0.70}), _run("three", 2, {4: 0.20})]
    settings = VerdictSettings(n_boot=200)
    found = {c.arm: c for c in verdicts(runs, settings)[None]}
    assert found["three"].paired_seeds == (0, 1) and found["three"].diff == pytest.approx(10.0)
    report = markdown_report(runs, settings)
    assert "| three | 46.7 [" in report
    assert ("| 2 seeds × 20 questions: seeds 0, 1, where budget_grpo scored 50.0 and three 60.0 (of its 3 seeds) "
            "| 10.0 [") in report
    assert "| 4 | three | 2 seeds × 20 questions: seeds 0, 1, where budget_grpo scored 50.0 and three 60.0" in report


def test_records_travel_through_export_and_restore(tmp_path):
    runs = [_run("grpo", 0, {4: 0.5}), _run("trace", 0, {4: 0.25})]
    runs[1].outcomes = None  # a run that kept none exports none
    written = export_runs(runs, tmp_path / "export")
    assert sorted(p.name for p in (tmp_path / "export").glob(f"*{TEST_OUTCOMES}")) == [f"grpo_seed0.{TEST_OUTCOMES}"]
    back = read_exported(written[0])
    assert [o.model_dump() for o in back.outcomes] == [o.model_dump() for o in runs[0].outcomes]
    assert read_exported(written[1]).outcomes is None
    restored = restore_finished(tmp_path / "export", tmp_path / "sweep", warn=pytest.fail)
    assert len(read_outcomes(restored[0] / TEST_OUTCOMES)) == 20
    # a refreshed export whose run lost its records drops the stale file
    runs[0].outcomes = None
    export_runs(runs, tmp_path / "export", refresh=True)
    assert not list((tmp_path / "export").glob(f"*{TEST_OUTCOMES}"))
    # a damaged records file leaves its run out with one line, like any damaged run file
    export_runs([_run("grpo", 0, {4: 0.5})], tmp_path / "export2")
    (tmp_path / "export2" / f"grpo_seed0.{TEST_OUTCOMES}").write_text('{"id": "q"}\n')
    found, left_out = read_runs(tmp_path / "export2")
    assert found == [] and len(left_out) == 1 and "success: Field required" in left_out[0]


def test_compare_refuses_a_bad_margin_in_one_line(tmp_path, capsys):
    import runpy

    from tiny_runs import ROOT

    main = runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]
    for flag, value, why in (("--margin", "0", "margin 0 must be in (0, 100]"), ("--alpha", "0.7", "alpha 0.7"),
                             ("--bootstrap", "5", "bootstrap resamples 5"), ("--bootstrap-seed", "-1", "seed -1")):
        with pytest.raises(SystemExit):
            main([str(tmp_path), flag, value])
        assert why in capsys.readouterr().err


# Each committed report and the folders it is written from (docs/results/README.md); compare_long in the
# default suite, the others slow (a few seconds each: 10,000 resamples per comparison and the PNG).
COMMITTED = {"compare_long": ["compare_long"],
             **{name: [name] for name in ("compare", "compare_build_e", "ablations_build_e", "compare_testbed_view",
                                          "compare_long_seed1_old_split")},
             "compare_long_gigpo_gamma1": ["compare_long_gigpo_gamma1", "compare_long"],
             "compare_long_vs_grpo": ["compare_long", "--reference", "grpo"],  # the verdicts against plain GRPO
             "compare_long_gigpo_gamma1_vs_grpo": ["compare_long_gigpo_gamma1", "compare_long", "--reference", "grpo"],
             "compare_long_gigpo_gamma1_vs_gigpo": ["compare_long_gigpo_gamma1", "compare_long", "--reference", "gigpo"],
             # the tuned comparison as far as it has run (docs/tuning.md, "Across sessions"), with its gains over the base policy
             "compare_long_tuned": ["compare_long_tuned", "--base-policy", "base_policy_long"],
             # the same against tuned GRPO, which trains at the credit arms' learning rate (docs/tuning.md)
             "compare_long_tuned_vs_grpo": ["compare_long_tuned", "--reference", "grpo_tuned", "--base-policy",
                                            "base_policy_long"]}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "compare_long" else [pytest.mark.slow])
                                  for n in COMMITTED])
def test_committed_report_regenerates_byte_for_byte(name, tmp_path):
    """docs/results/<name>/compare.md is what today's compare.py writes from the committed summaries."""
    import runpy

    from tiny_runs import ROOT

    main = runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]
    results = ROOT / "docs" / "results"
    argv = [a if a.startswith("-") or a in ("grpo", "grpo_tuned", "gigpo") else str(results / a) for a in COMMITTED[name]]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "compare.md").read_text() == (results / name / "compare.md").read_text()


def test_the_automatic_reference_prefers_budget_matched_grpo_then_the_tuned_arms():
    from agentcredit.analysis.comparison import reference_of

    assert reference_of({"grpo": [], "budget_grpo": [], "budget_grpo_tuned": []}, "auto") == "budget_grpo"
    assert reference_of({"grpo_tuned": [], "budget_grpo_tuned": [], "trace_tuned": []}, "auto") == "budget_grpo_tuned"
    assert reference_of({"grpo_tuned": [], "trace_tuned": []}, "auto") == "grpo_tuned"
    assert reference_of({"grpo": [], "grpo_tuned": []}, "auto") == "grpo"
    assert reference_of({"trace": []}, "auto") == "grpo"  # none present: the report says there is no reference run
    assert reference_of({"grpo": [], "budget_grpo": []}, "trace") == "trace"


def test_accuracy_by_hop_count_by_hand():
    from agentcredit.analysis.comparison import VerdictSettings, hop_accuracy, hop_accuracy_lines
    from agentcredit.analysis.comparison_runs import Run
    from agentcredit.records.outcomes import OutcomeRecord

    def run(seed, successes):
        outcomes = [OutcomeRecord(id=q, hops=h, success=x, tool_calls=1.0, tokens=5.0) for q, h, x in successes]
        return Run(f"{seed}", "a", seed, {"test/accuracy": 0.5}, {1: {"train/reward": 0.1}}, outcomes)

    runs = [run(0, [("q1", 4, 1.0), ("q2", 4, 0.0), ("q3", 5, 1.0)]),
            run(1, [("q1", 4, 0.0), ("q2", 4, 0.0), ("q3", 5, 1.0)])]
    s = VerdictSettings(n_boot=500)
    mean, ci, n = hop_accuracy(runs, 4, s)
    assert (mean, n) == (25.0, 2) and 0.0 <= ci[0] <= 25.0 <= ci[1] <= 100.0  # (100 + 0 + 0 + 0) / 4
    assert hop_accuracy(runs, 5, s) == (100.0, (100.0, 100.0), 1) and hop_accuracy(runs, 6, s) is None
    lines = hop_accuracy_lines({"a": runs}, s)
    assert lines[3] == "| arm | 4 hops | 5 hops |" and lines[5].startswith("| a | 25.0 [") and "(n=2)" in lines[5]
    assert lines[5].endswith("| 100.0 [100.0, 100.0] (n=1) |")
    assert hop_accuracy_lines({"a": [Run("0", "a", 0, {"test/accuracy": 0.5})]}, s) == []  # no records


def test_the_verdicts_in_words_list_every_arm_once_under_its_verdict():
    import dataclasses

    from agentcredit.analysis.comparison import verdict_summary
    from agentcredit.analysis.comparison_stats import Comparison, verdict_words

    def c(arm, diff, ci, kind, within=False):
        return Comparison(arm, 5, 1036, diff, ci, ci, 5, 0.06, 0.01, 0.5, 2.0, kind=kind, within=within,
                          verdict=verdict_words(kind, within, 2.0))

    found = {None: [c("a", 3.04, (1.0, 5.2), "better"), c("b", -2.5, (-3.0, -1.96), "worse"),
                    c("e", 0.4, (-0.2, 1.0), "equivalent", True), c("f", 1.2, (0.6, 1.5), "better", True),
                    c("i", 1.0, (-3.0, 5.0), "inconclusive")],
             5: [c("a", 7.0, (2.0, 12.0), "better"), c("b", 0.0, (-4.0, 4.0), "inconclusive")],
             6: [c("a", 1.0, (-3.0, 5.0), "inconclusive")]}
    assert verdict_summary(found, "ref", 2.0) == ["", (
        "In words, against ref over all test questions (the verdicts above): better: a (+3.0 [+1.0, +5.2] points), "
        "f (+1.2 [+0.6, +1.5] points, within ±2); worse: b (-2.5 [-3.0, -2.0] points); equivalent within ±2 points: "
        "e (+0.4 [-0.2, +1.0] points); inconclusive (neither a difference nor equivalence shown): i. "
        "Per hop count: 5 hops: a better (+7.0 [+2.0, +12.0] points).")]
    quiet = {None: [c("i", 1.0, (-3.0, 5.0), "inconclusive")], 4: [c("i", 1.0, (-3.0, 5.0), "inconclusive")]}
    assert verdict_summary(quiet, "ref", 2.0)[1].endswith(
        "better: none; worse: none; equivalent within ±2 points: none; inconclusive (neither a difference nor "
        "equivalence shown): i. Per hop count: no arm is shown better, worse or equivalent at any hop count.")
    assert verdict_summary({None: [c("i", 1.0, None, "inconclusive")]}, "ref", 2.0)[1].endswith(": i.")  # no hop counts
    assert verdict_summary({}, "ref", 2.0) == []
    # with a t-interval over seeds (wider than the bootstrap's with few seeds), both are said
    wide = Comparison("w", 4, 1036, 0.7, (-4.4, 6.3), (-3.5, 5.2), 4, 0.8, 0.6, 0.5, 12.7, kind="inconclusive",
                      verdict=verdict_words("inconclusive", False, 2.0), seed_ci=(-8.8, 10.2))
    assert verdict_summary({None: [wide], 5: [dataclasses.replace(wide, kind="better", verdict="better")]}, "ref",
                           2.0)[1].endswith("Per hop count: 5 hops: w better (+0.7 [-4.4, +6.3] points; t over seeds "
                                            "[-8.8, +10.2]).")


def test_a_run_whose_test_questions_are_not_the_others_is_left_out_with_the_reason(tmp_path, capsys):
    import runpy

    from agentcredit.analysis.comparison_runs import unmatched_questions
    from tiny_runs import ROOT

    runs = [_run(arm, seed, {4: 0.5, 5: 0.25}) for arm in ("budget_grpo", "trace") for seed in (0, 1)]  # 40 questions
    runs.append(_run("grpo", 0, {4: 0.5}))  # 20 of them: a records file cut short at a line end
    other = _run("grpo", 1, {4: 0.5, 5: 0.25})
    other.outcomes[:3] = [o.model_copy(update={"id": f"other-{o.id}"}) for o in other.outcomes[:3]]
    runs.append(other)
    for run in runs:
        run.source = tmp_path / run.name
    kept, left_out = unmatched_questions(runs)
    assert kept == runs[:4] and left_out == [
        f"{tmp_path / 'grpo0'} left out: its test outcomes hold 20 of the 40 questions that 4 other runs all answered; "
        "verdicts pair runs question by question, so it would shrink every comparison it is in",
        f"{tmp_path / 'grpo1'} left out: its test outcomes hold 40 questions, 3 of them not among the 40 that 4 other "
        "runs all answered (another test split?); verdicts pair runs question by question, so it would unpair every "
        "comparison it is in"]
    assert unmatched_questions(runs[:4]) == (runs[:4], [])
    bare = Run("bare", "grpo", 0, {"test/accuracy": 0.5}, {0: {"train/reward": 0.3}})  # no records: seeds alone
    assert unmatched_questions([*runs[:4], bare]) == ([*runs[:4], bare], [])

    # Through the command: each named on stderr and under the report, the count line right, every verdict over
    # the 40 questions that all compared runs answered
    export_runs(runs, tmp_path / "export")
    main = runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]
    assert main([str(tmp_path / "export"), "--out", str(tmp_path / "report"), "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 2 and "grpo_seed0.summary.json left out: its test outcomes hold 20 of the 40" in err
    report = (tmp_path / "report" / "compare.md").read_text()
    left = report.split("Left out of this comparison")[1]
    assert "grpo_seed0.summary.json left out: its test outcomes hold 20 of" in left
    assert "grpo_seed1.summary.json left out: its test outcomes hold 40 questions, 3 of them not among" in left
    assert "| trace | " in report and "| 2 seeds × 40 questions | " in report and "| grpo |" not in report
    assert "4 runs (2 left out)" in out


def test_records_unlike_their_summary_and_questions_of_another_hop_count_are_left_out_before_question_sets(
        tmp_path, capsys):
    """The damaged runs being the majority must not make the whole ones look like another split: records that do
    not average to their own run's test accuracy go first, then a question whose hop count is not the others'."""
    import runpy

    from agentcredit.analysis.comparison_runs import comparable_runs
    from tiny_runs import ROOT

    runs = [_run(arm, seed, {4: 0.5, 5: 0.25}) for arm in ("budget_grpo", "trace", "grpo") for seed in (0, 1)]
    for run in runs:
        run.source = tmp_path / run.name
    for run in runs[:4]:  # budget_grpo and trace: their records cut to the 4-hop half, their summaries whole
        run.outcomes = [o for o in run.outcomes if o.hops == 4]
    kept, left_out = comparable_runs(runs)
    assert kept == runs[4:] and len(left_out) == 4
    assert left_out[0] == (f"{tmp_path / 'budget_grpo0'} left out: the mean success of its 20 per-question test "
                           "records, 50.00%, is not its summary's test accuracy, 37.50%: the records are cut short or "
                           "damaged, or belong to another run")
    whole = [_run(arm, seed, {4: 0.5, 5: 0.25}) for arm in ("budget_grpo", "trace") for seed in (0, 1)]
    odd = whole[3]
    odd.outcomes[0] = odd.outcomes[0].model_copy(update={"hops": 50})
    odd.source = tmp_path / "trace1"
    kept, left_out = comparable_runs(whole)
    assert kept == whole[:3] and left_out == [
        f"{tmp_path / 'trace1'} left out: question {odd.outcomes[0].id!r} has 50 hops here and 4 in 3 other runs: "
        "another world's questions under the same ids"]
    assert comparable_runs(whole[:3]) == (whole[:3], [])

    # Through the command: the auto reference moves to grpo when every budget_grpo run is left out, and says so
    export_runs(runs, tmp_path / "export")
    main = runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]
    assert main([str(tmp_path / "export"), "--out", str(tmp_path / "report"), "--bootstrap", "200"]) == 0
    err = capsys.readouterr().err
    assert ("--reference auto: every budget_grpo run was left out (above), so the verdicts are against grpo; name "
            "--reference to choose") in err
