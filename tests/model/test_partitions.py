"""MI355X compute partitions (issue 15 item 4; seed 000 "Partition modes"): SPX / DPX / QPX / CPX present one
package as 1 / 2 / 4 / 8 logical GPUs of 8 / 4 / 2 / 1 XCDs and 288 / 144 / 72 / 36 GB of HBM each, without
rebuilding the package."""

from __future__ import annotations

import numpy as np
import pytest

from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip, with_overrides
from dse.workload import decode

MI = load_chip("mi355x")
DEC = decode("qwen3-8b", batch=1, context=8192)
SEED_000 = {1: 288e9, 2: 144e9, 4: 72e9, 8: 36e9}  # HBM per logical GPU (seed 000 table)


def _at(p):
    return evaluate_design(Chips.from_base(MI, 1, {"system.partitions": np.array([float(p)])}), DEC)


def test_each_mode_gets_its_share():
    spx = _at(1)
    for p, hbm in SEED_000.items():
        m = _at(p)
        assert m["capacity_bytes"][0] == pytest.approx(hbm)
        # the package is the same silicon; one logical device costs its share
        assert m["die_area_mm2"][0] == spx["die_area_mm2"][0]
        assert m["chip_cost_usd"][0] == pytest.approx(spx["chip_cost_usd"][0] / p)
        assert m["tdp"][0] == pytest.approx(1400.0 / p)  # the package's 1.4 kW (seed 000) shared
        # batch-1 decode is a read of the weights and KV over 1/p of the 8 TB/s: p times as long, within the
        # launch-free model's fixed costs
        assert m["time_s"][0] == pytest.approx(p * spx["time_s"][0], rel=0.01)


def test_a_partition_is_whole_dies():
    with pytest.raises(SpecError, match="whole dies"):
        with_overrides(MI, {"system.partitions": 3})
