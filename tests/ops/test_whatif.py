"""The what-if of a candidate vector budget, against examples worked by hand."""

import math
import re

import pytest
from django.test import Client

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.generations import ensure_active_generation
from ops.rollup_writer import RollupWriter
from ops.whatif import Cumulative, predict
from retrieval import metrics
from tests import ops_personas

# 100 searches under a 40 ms budget: 50 stages took at most 10 ms, 80 at most 20, 90 at
# most 30, 95 at most 40; the other 5 were cut at 40 ms.
RECORD = Cumulative({0.01: 50, 0.02: 80, 0.03: 90, 0.04: 95, 0.06: 95, 0.08: 95}, total=100)
# 20 of them sampled, watched past the budget: 16 within 40 ms, 18 within 50, 19 within 60
# and 80; one still running at the sample's limit.
SAMPLED = Cumulative({0.04: 16, 0.05: 18, 0.06: 19, 0.08: 19}, total=20)


def test_a_tighter_budget_degrades_every_stage_longer_than_it() -> None:
    at_20 = predict(RECORD, 0.04, 0.02)
    assert at_20.degraded == pytest.approx(0.20)  # 100 - 80, the 5 cut ones among them
    assert (at_20.p50_s, at_20.p99_s) == (0.01, 0.02)  # the p99 stage is cut at 20 ms
    assert at_20.measured


def test_the_budget_in_force_degrades_what_was_cut() -> None:
    assert predict(RECORD, 0.04, 0.04).degraded == pytest.approx(0.05)


def test_a_looser_budget_scales_the_cut_share_by_the_samples_tail() -> None:
    # 4 sampled stages passed 40 ms, 1 of them passed 60: a quarter of the 5 % cut.
    at_60 = predict(RECORD, 0.04, 0.06, SAMPLED)
    assert at_60.degraded == pytest.approx(0.05 * 1 / 4)
    assert not at_60.measured
    # The p99 search lies 0.8 into the cut 5 %: 3.2 of the 4 sampled past the budget,
    # and only 3 finished by 60 ms, so the stage runs to the candidate.
    assert at_60.p99_s == 0.06
    assert at_60.p50_s == 0.01
    at_50 = predict(RECORD, 0.04, 0.05, SAMPLED)
    assert at_50.degraded == pytest.approx(0.05 * 2 / 4)


def test_a_looser_budget_without_a_sample_past_the_budget_is_unknown() -> None:
    within = Cumulative({0.04: 3, 0.05: 3, 0.06: 3, 0.08: 3}, total=3)
    assert predict(RECORD, 0.04, 0.06, within).degraded is None
    assert predict(RECORD, 0.04, 0.06).degraded is None


def test_a_looser_budget_changes_nothing_when_nothing_was_cut() -> None:
    none_cut = Cumulative({0.01: 9, 0.04: 10, 0.06: 10}, total=10)
    assert predict(none_cut, 0.04, 0.06).degraded == 0.0


def test_no_searches_predict_nothing() -> None:
    empty = predict(Cumulative({0.02: 0, 0.04: 0}, total=0), 0.04, 0.02)
    assert empty.degraded is None
    assert math.isnan(empty.p99_s)


def test_a_candidate_between_bounds_is_refused() -> None:
    with pytest.raises(ValueError, match="not a bound"):
        predict(RECORD, 0.04, 0.025)


@pytest.mark.django_db
def test_the_ops_page_shows_the_what_if_of_the_searches_on_record(
    client: Client, own_rollup_writer: RollupWriter
) -> None:
    generation = ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
    stage = metrics.VECTOR_STAGE.labels("short", str(generation))
    sampled = metrics.VECTOR_STAGE_SAMPLED.labels("short", str(generation))
    # Ten searches under the 40 ms budget: 8 stages of 8 ms, one of 30, one cut; two of
    # them watched, one of which went on to take 60 ms.
    for took in [0.008] * 8 + [0.03, math.inf]:
        stage.observe(took)
    sampled.observe(0.008)
    sampled.observe(0.06)
    client.force_login(ops_personas.ops_member())

    html = client.get("/ops/").content.decode()

    table = html[
        html.index('id="whatif-last-hour"') : html.index(
            "</table>", html.index('id="whatif-last-hour"')
        )
    ]
    rows = dict(re.findall(r'<th scope="row">(\d+) ms[^<]*</th>\s*((?:<td>[^<]*</td>)+)', table))
    short = {
        candidate: re.findall(r"<td>([^<]*)</td>", cells)[:2] for candidate, cells in rows.items()
    }
    assert short["5"] == ["100.0%", "5 ms"]
    assert short["20"] == ["20.0%", "20 ms"]  # the 30 ms stage and the cut one
    assert short["40"] == ["10.0%", "40 ms"]  # the cut one: in force, what was measured
    assert short["50"] == ["~10.0%", "50 ms"]  # the watched one passed 50 ms too
    assert short["70"] == ["~0.0%", "60 ms"]  # the p99 search is the cut one: 60 ms
    assert "generation " + str(generation) in table
    assert "10 searches" in table
