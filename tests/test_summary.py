"""Intervals a statistician would sign: Wilson for proportions, Student-t for means, inside each metric's range."""

import json
import math

import pytest

from agents.statistics import interval, jsonable, markdown_table, mean_ci, summarize, table_head

Z = 1.959963984540054  # the 97.5% normal quantile


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval written out, to check scipy's against."""
    center, half = (k + Z * Z / 2) / (n + Z * Z), Z / (n + Z * Z) * math.sqrt(k * (n - k) / n + Z * Z / 4)
    return center - half, center + half


def test_all_correct_is_not_certain():
    ci = interval([1.0] * 20, bounded=True)
    assert ci.method == "wilson" and ci.mean == 1.0 and ci.high == pytest.approx(1.0)
    assert ci.low == pytest.approx(20 / (20 + Z * Z)) == pytest.approx(0.8389, abs=1e-4)


def test_none_correct_starts_at_zero():
    ci = interval([0.0] * 20, bounded=True)
    assert ci.low == 0.0 and ci.high == pytest.approx(wilson(0, 20)[1]) == pytest.approx(0.1611, abs=1e-4)


def test_a_low_rate_has_no_negative_bound():
    ci = interval([1.0, 1.0] + [0.0] * 18, bounded=True)  # 10%: mean ± 1.96 SE would reach -3.8%
    assert ci.method == "wilson" and ci.mean == pytest.approx(0.1)
    assert (ci.low, ci.high) == pytest.approx(wilson(2, 20)) and ci.low > 0


def test_t_interval_of_a_known_sample():
    mean, half = mean_ci([0.0, 1.0, 0.0, 1.0])  # sd = sqrt(1/3), t(0.975, df=3) = 3.1824
    assert mean == 0.5 and half == pytest.approx(3.182446305 * (1 / 3) ** 0.5 / 2)
    ci = interval([0.0, 1.0, 0.0, 1.0])
    assert ci.method == "t" and (ci.low, ci.high) == pytest.approx((0.0, 0.5 + half))  # counts stop at 0


def test_seeds_to_resolve_a_difference_are_the_fewest_whose_interval_excludes_zero():
    from agents.statistics import units_to_resolve

    # mean 0.2, sd 0.1: t(2) 4.303 x 0.1 / sqrt(3) = 0.248 >= 0.2, t(3) 3.182 x 0.1 / 2 = 0.159 < 0.2
    assert units_to_resolve([0.1, 0.2, 0.3]) == 4
    assert units_to_resolve([0.3, 0.2, 0.1, 0.2]) == 4  # only the mean and the spread count
    big = units_to_resolve([1.0, -0.5])  # mean 0.25, sd 1.06: about (1.96 x 1.06 / 0.25)^2 = 69
    assert 69 <= big <= 72 and mean_ci([1.0, -0.5] * (big // 2 + 1))[1] < 0.25
    assert units_to_resolve([0.5, 0.5]) == 2  # no spread
    assert units_to_resolve([1.0, -1.0]) is None and units_to_resolve([0.3]) is None  # no mean; no spread known
    assert units_to_resolve([1e-6, -1.0, 1.0]) is None  # beyond the limit


def test_bounded_means_stay_within_zero_and_one():
    values = [0.0] * 17 + [0.5, 0.9, 1.0]  # F1: not all 0 or 1, so a t-interval, cut to [0, 1]
    ci = interval(values, bounded=True)
    assert ci.method == "t" and ci.low == 0.0 and ci.mean < ci.high < 1.0
    assert interval([1.0] * 19 + [0.5], bounded=True).high == 1.0


def test_one_episode_has_no_t_interval():
    assert math.isnan(mean_ci([3.0])[1])
    ci = interval([3.0])
    assert ci.mean == 3.0 and math.isnan(ci.low) and math.isnan(ci.high)
    assert interval([1.0], bounded=True).low == pytest.approx(wilson(1, 1)[0])  # a proportion still has one


def test_order_of_episodes_does_not_matter():
    values = [0.1 * i for i in range(30)] + [1e6]
    assert interval(values) == interval(values[::-1])


def episodes(agent: str, em: list[float]) -> list[dict]:
    return [{"agent": agent, "context": "memory", "objectives": 1, "em": e, "f1": e, "format_ok": True,
             "n_turns": 2 + i % 3} for i, e in enumerate(em)]


def test_rows_tables_and_json_carry_the_intervals():
    rows = summarize(episodes("oracle", [1.0] * 20) + episodes("weak", [1.0, 1.0] + [0.0] * 18))
    oracle, weak = rows
    assert oracle["em"][0] == 1.0 and oracle["em"].low == pytest.approx(0.8389, abs=1e-4)
    assert oracle["format_ok"].method == "wilson" and oracle["n_turns"].method == "t"
    table = markdown_table(rows)
    assert "| oracle | memory | 1 | 20 | 100.0 [83.9, 100.0] | 100.0 [83.9, 100.0] | 100.0 [83.9, 100.0] |" in table
    assert "| weak | memory | 1 | 20 | 10.0 [2.8, 30.1] |" in table
    assert "Wilson" in table and "Student-t" in table and "±" not in table
    saved = json.loads(json.dumps(jsonable(rows)))
    assert saved[0]["em"] == {"mean": 1.0, "low": pytest.approx(0.8389, abs=1e-4), "high": pytest.approx(1.0),
                              "interval": "wilson"}
    assert saved[0]["episodes"] == 20 and saved[0]["agent"] == "oracle"


def test_a_single_episode_row_reads_n_a():
    table = markdown_table(summarize(episodes("oracle", [1.0])))
    assert "| 100.0 [20.7, 100.0] |" in table and "| 2.0 [n/a] |" in table
    assert jsonable(summarize(episodes("oracle", [1.0])))[0]["n_turns"]["low"] is None


def test_a_table_head_counts_its_delimiters_from_its_columns():
    assert table_head(["arm", "F1 %", "TT tokens"], align="lr") == ["| arm | F1 % | TT tokens |", "|---|---:|---|"]
    assert table_head(["a", "b"]) == ["| a | b |", "|---|---|"]
    with pytest.raises(ValueError, match="align"):
        table_head(["a"], align="lr")  # more marks than columns
    with pytest.raises(ValueError, match="align"):
        table_head(["a", "b"], align="c")
