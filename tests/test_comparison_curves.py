"""The comparison report's held-out learning curves and its "did the runs stop rising?" table
(agentcredit/analysis/comparison_curves.py), against hand-computed numbers."""

from __future__ import annotations

from agentcredit.analysis.comparison import markdown_report
from agentcredit.analysis.comparison_curves import curve_lines, run_curve
from agentcredit.analysis.comparison_runs import Run
from agentcredit.records.outcomes import OutcomeRecord


def _run(seed: int, successes: dict[int, list[int]], arm: str = "grpo") -> Run:
    val = {step: [OutcomeRecord(id=f"q{i}", success=float(x), tool_calls=1.0, tokens=10.0) for i, x in enumerate(xs)]
           for step, xs in successes.items()}
    return Run(f"{seed}_job", arm, seed, {"test/accuracy": 0.5}, {1: {"train/reward": 0.1}}, None, val)


# Four questions. Seed 0: 0, 2, 3 right at steps 0, 100, 200; seed 1: 1, 2, 2.
SEED0 = _run(0, {0: [0, 0, 0, 0], 100: [1, 1, 0, 0], 200: [1, 1, 1, 0]})
SEED1 = _run(1, {0: [1, 0, 0, 0], 100: [1, 1, 0, 0], 200: [1, 1, 0, 0]})


def test_each_run_gets_the_pilot_rule_by_hand():
    c0, c1 = run_curve(SEED0), run_curve(SEED1)
    # seed 0, 100 -> 200: gain 0.25, p = 0.625, SE sqrt(0.625 * 0.375 / 4) = 0.2421: still rising
    assert [(w.start, w.end) for w in c0.windows] == [(0, 100), (100, 200)]
    assert c0.windows[1].gain == 0.25 and c0.windows[1].rising and c0.flat_from is None
    # seed 1, 100 -> 200: gain 0: flat from 100 (0 -> 100 gained 0.25 >= its SE 0.2421)
    assert c1.windows[0].rising and not c1.windows[1].rising and c1.flat_from == 100
    assert run_curve(_run(2, {})) is None


def test_the_section_gives_mean_accuracy_by_step_and_the_last_window_over_seeds():
    lines = curve_lines({"grpo": [SEED0, SEED1]})
    # means over the two seeds: (0 + 25) / 2, (50 + 50) / 2, (75 + 50) / 2
    assert "| grpo | 12.5 | 50.0 | 62.5 |" in lines
    # last-window gains 25 and 0 points: mean 12.5, sd 17.678, t(0.975, 1) = 12.706: half-width 158.8
    assert "| grpo | 100 → 200 | +12.5 [-146.3, +171.3] | 1 of 2 | rising, 100 |" in lines


def test_runs_without_validation_outcomes_leave_the_report_as_it_was():
    plain = [Run(f"{s}_job", "grpo", s, {"test/accuracy": 0.5}, {1: {"train/reward": 0.1}}) for s in (0, 1)]
    assert curve_lines({"grpo": plain}) == []
    assert "Held-out learning curves" not in markdown_report(plain)
    assert "Held-out learning curves" in markdown_report([SEED0, SEED1])
    single = _run(0, {0: [0, 1, 0, 0]})  # one validation: no window
    assert "| grpo | – | – | – | no two validations 100 steps apart |" in curve_lines({"grpo": [single]})


def _rewards(seed: int, rewards: list[float], arm: str = "grpo") -> Run:
    return Run(f"{seed}_job", arm, seed, {"test/accuracy": 0.5}, {s: {"train/reward": r} for s, r in enumerate(rewards)})


def test_the_closing_reward_trend_by_hand():
    import pytest

    from agentcredit.analysis.comparison_curves import reward_trend, reward_trend_lines

    # rewards 0.5 at steps 0-1, then 0.10, 0.12, 0.17 at steps 2-4. The second half of 5 steps is the last 3 (rounded
    # up): slope Σ(x − 3)(y − 0.13) / Σ(x − 3)² = (−1 · −0.03 + 1 · 0.04) / 2 = 0.035 a step, 3.5 per 100 steps.
    run = _rewards(0, [0.5, 0.5, 0.10, 0.12, 0.17])
    assert abs(reward_trend(run, 0.5) - 3.5) < 1e-9
    # the whole run: x̄ = 2, ȳ = 0.278; Σ(x − 2)(y − ȳ) = −2·0.222 − 0.222 + 0 − 0.158 − 2·0.108 = −1.04 over
    # Σ(x − 2)² = 10: −0.104 a step
    assert abs(reward_trend(run, 1.0) - -10.4) < 1e-9
    assert reward_trend(run, 0.25) is None  # 2 steps: fewer than MIN_TREND_STEPS, no slope
    with pytest.raises(ValueError, match="share must be in"):
        reward_trend(run, 0)
    # the window is a share of the steps' span, not of the logged points: steps 0-9 (reward 0) and 90-99 (reward 0.5)
    # logged, the last 75% is steps 25-99, so the flat ten of 90-99 (slope 0), not the last 15 of 20 points (5-9 too)
    steps = {s: {"train/reward": 0.0 if s < 10 else 0.5} for s in [*range(10), *range(90, 100)]}
    gappy = Run("gap", "grpo", 0, {"test/accuracy": 0.5}, steps)
    assert abs(reward_trend(gappy, 0.75)) < 1e-12 and reward_trend(gappy, 1.0) > 0.5
    falling = _rewards(1, [0.5, 0.5, 0.17, 0.12, 0.10])  # second half −3.5; whole run (−0.444 − 0.222 + 0 − 0.158 − 0.356)/10
    assert abs(reward_trend(falling, 1.0) - -11.8) < 1e-9
    # whole run: seeds −10.4 and −11.8, mean −11.1, sd 1.4/√2, t(0.975, 1) = 12.7062: half-width 12.7062 · 0.7 = 8.894;
    # second half: seeds +3.5 and −3.5, mean 0, sd 4.9497, half-width 12.7062 · 4.9497 / √2 = 44.472; 1 of 2 rose
    shares, first_half = ((1.0, "whole run"), (0.5, "second half")), "first half"
    lines = reward_trend_lines({"grpo": [run, falling], "short": [_rewards(0, [0.1, 0.2])]}, shares, first_half)
    assert "| arm | seeds | slope, whole run | slope, second half | runs rising over the second half | " \
           "second half − first half |" in lines
    # the second half of 5 steps is steps 2-4: no 3 steps before it, no slowing
    assert "| grpo | 2 | -11.100 [-19.994, -2.206] | +0.000 [-44.472, +44.472] | 1 of 2 | – |" in lines
    assert not any(line.startswith("| short") for line in lines)  # an arm with no run long enough has no row
    # seed 0: +3.5 (grpo; the short arm has no slope), seed 1: −3.5
    assert lines[-1] == "The second half's slope averaged over the arms of each seed: seed 0 +3.500 (1 arm), " \
                        "seed 1 -3.500 (1 arm)."
    assert reward_trend_lines({"short": [_rewards(0, [0.1, 0.2])]}, shares, first_half) == []  # no arm: no section


def test_the_slowing_of_the_reward_trend_by_hand():
    import pytest

    from agentcredit.analysis.comparison_curves import reward_slowing, reward_trend_lines

    # 8 steps: the second half is steps 4-7, the window as long before it 0-3. In reward per 100 steps: a run that rises
    # 0.1 a step, then stays, slows by 0 − 10 = −10; one that stays, then rises 0.1 a step: +10; 0.2 a step: +20.
    rise_then_stay = [0.0, 0.1, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3]
    grpo0 = _rewards(0, rise_then_stay)
    grpo1 = _rewards(1, [0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.2, 0.3])
    trace0 = _rewards(0, [0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.4, 0.6], arm="trace")
    trace1 = _rewards(1, rise_then_stay, arm="trace")
    gold0 = _rewards(0, rise_then_stay, arm="gold")  # seed 0 only: left out of the mean over seeds
    assert abs(reward_slowing(grpo0, 0.5) - -10) < 1e-9 and abs(reward_slowing(grpo1, 0.5) - 10) < 1e-9
    assert reward_slowing(grpo0, 0.25) is None  # the last quarter of 8 steps is steps 6-7: 2 points, no slope
    with pytest.raises(ValueError, match=r"share must be in \(0, 0.5\]"):
        reward_slowing(grpo0, 0.6)
    # the windows are step counts, not points: steps 0, 1, 4-7 logged leave 2 points before the second half
    gappy = Run("gap", "grpo", 0, {"test/accuracy": 0.5}, {s: {"train/reward": 0.1 * s} for s in (0, 1, 4, 5, 6, 7)})
    assert reward_slowing(gappy, 0.5) is None
    shares = ((0.5, "second half"),)
    lines = reward_trend_lines({"grpo": [grpo0, grpo1], "trace": [trace0, trace1], "gold": [gold0]}, shares, "first half")
    # grpo: −10 and +10, mean 0, sd 14.142, half-width t(0.975, 1) · 14.142 / √2 = 127.062; second half 0 and 10
    assert "| grpo | 2 | +5.000 [-58.531, +68.531] | 1 of 2 | +0.000 [-127.062, +127.062] |" in lines
    # trace: second half 20 and 0 (half-width 127.062); slowing +20 and −10, mean 5, sd 21.213, half-width 190.593
    assert "| trace | 2 | +10.000 [-117.062, +137.062] | 1 of 2 | +5.000 [-185.593, +195.593] |" in lines
    assert "| gold | 1 | +0.000 | 0 of 1 | -10.000 |" in lines
    # over grpo and trace (gold has no seed 1): seed 0 (−10 + 20) / 2 = +5, seed 1 (10 − 10) / 2 = 0; over seeds 2.5,
    # sd 3.5355, half-width 12.7062 · 3.5355 / √2 = 31.766
    assert lines[-1] == "The second half's slope minus the first half's, averaged over the arms of each seed (the 2 " \
                        "arms with a value at every seed kept; arms left out: gold): seed 0 +5.000, seed 1 +0.000; " \
                        "over seeds +2.500 [-29.266, +34.266] (95% t over 2 seeds)."
    # a seed only some arms reached is left out rather than the arms: seeds 0-1 for all three arms, seed 2 for one
    # (grpo 2 slows by −10 like grpo 0): the block is 3 arms x 2 seeds, not 1 arm x 3
    trace1_gold1 = [_rewards(1, rise_then_stay, arm="trace"), _rewards(1, rise_then_stay, arm="gold")]
    lines = reward_trend_lines({"grpo": [grpo0, grpo1, _rewards(2, rise_then_stay)], "trace": [trace0, trace1_gold1[0]],
                                "gold": [gold0, trace1_gold1[1]]}, shares, "first half")
    # seed 0: (−10 + 20 − 10) / 3 = 0, seed 1: (10 − 10 − 10) / 3 = −3.333; mean −1.667, sd 2.357, half-width 21.177
    assert lines[-1] == "The second half's slope minus the first half's, averaged over the arms of each seed (the 3 " \
                        "arms with a value at every seed kept; seeds left out: 2): seed 0 +0.000, seed 1 -3.333; " \
                        "over seeds -1.667 [-22.844, +19.510] (95% t over 2 seeds)."
    # a run with no earlier window shows in its arm's count (both second halves rise 0.1 a step); an arm with one seed
    # gives no interval over seeds
    lines = reward_trend_lines({"grpo": [gappy, grpo1]}, shares, "first half")
    assert "| grpo | 2 | +10.000 [+10.000, +10.000] | 2 of 2 | +10.000 (1 of 2 runs) |" in lines
    assert lines[-1].endswith("(the 1 arm with a value at every seed kept): seed 1 +10.000; one seed, no interval "
                              "over seeds.")
    # no two seeds share an arm: the seed most arms ran (the first on a tie), no mean over seeds
    lines = reward_trend_lines({"grpo": [grpo0], "trace": [trace1]}, shares, "first half")
    assert lines[-1].endswith("(the 1 arm with a value at every seed kept; arms left out: trace; seeds left out: 1): "
                              "seed 0 -10.000; one seed, no interval over seeds.")
