"""Cost per million output tokens: the chip's price spread over its lifetime output, plus electricity.

Formula: 1e6 x (chip_cost_usd / (tokens_per_s x utilization x lifetime)
               + energy_per_token_j x electricity_price)      ($ per 1e6 tokens; minimize)
Defaults (est.): lifetime 4 years, utilization 0.5 (seed 004 Example 4-3 uses 50%),
electricity_price 0.10 $/kWh. Energy is counted while serving (the evaluator's energy per
token); idle power and cooling overhead are not included.
Source: seed 004 §4.8.4 (cost per token c / (3600 u q); output D u q L over a lifetime);
dse.model.cost.cost_per_million_tokens.
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "cost_per_million_tokens"
UNIT = "$/Mtoken"
DIRECTION = "minimize"
FORMULA = "1e6 * (chip_cost_usd / (tokens_per_s * utilization * lifetime) + energy_per_token_j * electricity_price)"
SOURCE = "seed 004 §4.8.4 (c / (3600 u q); output D u q L); dse.model.cost"
YEAR_S = 365.0 * 86400.0
PARAMS = {
    "lifetime": ("time", 4 * YEAR_S),
    "utilization": ("dimensionless", 0.5),
    "electricity_price": ("money_per_energy", 0.10 / 3.6e6),
}


def objective(metrics, lifetime=4 * YEAR_S, utilization=0.5, electricity_price=0.10 / 3.6e6) -> np.ndarray:
    from dse.errors import SpecError
    from dse.model.cost import cost_per_million_tokens

    if not 0 < utilization <= 1:
        raise SpecError(f"{NAME}.utilization must be in (0, 1], got {utilization!r}")
    if not lifetime > 0:
        raise SpecError(f"{NAME}.lifetime must be > 0, got {lifetime!r}")
    if not electricity_price >= 0:
        raise SpecError(f"{NAME}.electricity_price must be >= 0, got {electricity_price!r}")
    return cost_per_million_tokens(
        column(metrics, "chip_cost_usd", NAME),
        column(metrics, "tokens_per_s", NAME),
        column(metrics, "energy_per_token_j", NAME),
        lifetime_s=lifetime, utilization=utilization, price_per_j=electricity_price,
    )
