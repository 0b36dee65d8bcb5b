"""The model behind "Past one primary" (benchmarks/shards.py): a merge by watermarks
gives every event out, in one order, within the bound the page states; a merge without
them breaks the order. The figures themselves come from running the benchmark."""

from __future__ import annotations

import pytest

from benchmarks.shards import Model, simulate


@pytest.mark.parametrize(("shards", "slow"), [(3, 0.0), (20, 0.0), (20, 0.05)])
def test_a_merge_by_watermarks_keeps_one_order_within_the_stated_bound(
    shards: int, slow: float
) -> None:
    model = Model(shards, rate=4_000, seconds=0.5, slow=slow)
    found = simulate(model)
    assert found["given_out"] == found["events"] > 1_000
    assert found["merged_stamps_out_of_order"] == 0
    assert found["merged_commits_out_of_order_beyond_2_skew"] == 0
    assert found["naive_stamps_out_of_order"] > 0
    bound = model.poll + model.visible + model.network + 2 * model.skew + slow
    assert found["merged"]["max_ms"] <= bound * 1000
    assert found["per_shard"]["p50_ms"] < found["merged"]["p50_ms"]
