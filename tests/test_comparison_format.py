"""The reports' one way of writing a figure in points: hand-written expected strings."""

from agentcredit.analysis.comparison_format import points, points_cell, points_interval


def test_points_rounds_to_one_decimal_and_never_writes_a_signed_zero():
    assert points(12.345) == "12.3"
    assert points(-0.04) == "0.0"
    assert points(-0.04, sign=True) == "0.0"
    assert points(0.04, sign=True) == "0.0"
    assert points(3.25, sign=True) == "+3.2"  # 3.25 is stored just below 3.25
    assert points(-4.46, sign=True) == "-4.5"
    assert points(-10.0) == "-10.0"


def test_interval_and_cell():
    assert points_interval(None) == "–"
    assert points_interval((-0.01, 8.84)) == "[0.0, 8.8]"
    assert points_cell(41.66, None) == "41.7"
    assert points_cell(41.66, (38.04, 45.26)) == "41.7 [38.0, 45.3]"
    # a signed figure keeps its interval unsigned, as in the report's gain columns
    assert points_cell(4.9, (-0.94, 10.6), sign=True) == "+4.9 [-0.9, 10.6]"
