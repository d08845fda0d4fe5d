"""Expert parallelism: how much more work the most loaded chip gets than the average one.

Under expert parallelism (``system.expert_parallel``) each of p chips holds E / p experts, and a MoE layer ends
when its most loaded chip does. The evaluator times a system of chips as one chip with their summed resources,
which is the average chip; :func:`ep_load_factors` is the ratio of the most loaded chip's expected work to the
average's, for a router that picks its top-k experts independently for each token (``routing: random``,
dse.workload.routing.random_rows). Uniform routing spreads the dispatches evenly (factor 1, the seed's ideal
dispersed case).

Each rule lives here once; the evaluator (dse/model/evaluator.py) calls it. Pure and vectorized over ``chips``.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["expected_max_normal", "ep_load_factors"]


#: E[max of p independent standard normals] for p = 2..10 (Harter 1961, "Expected values of normal order
#: statistics", Biometrika 48; p = 2 is 1 / sqrt(pi), p = 3 3 / (2 sqrt(pi)))
_NORMAL_MAX = {2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630, 6: 1.2672, 7: 1.3522, 8: 1.4236, 9: 1.4850, 10: 1.5388}


def expected_max_normal(p) -> np.ndarray:
    """E[max of p independent standard normals]: Harter's table up to 10, beyond it Blom's approximation
    Phi^-1((p - 0.375) / (p + 0.25)) (Blom 1958; within 1% from p = 8 on: 1.434 for 1.424). 0 for p <= 1."""
    p = np.asarray(p, dtype=float)
    out = np.zeros(p.shape)
    for v in np.unique(p[p > 1]):
        exact = _NORMAL_MAX.get(int(v)) if v == int(v) else None
        out[p == v] = exact if exact is not None else NormalDist().inv_cdf((v - 0.375) / (v + 0.25))
    return out


def ep_load_factors(tokens, top_k, experts, chips):
    """(f_active, f_rows): the most loaded of ``chips`` chips' expected active experts and routed rows over the
    average chip's, for ``tokens`` tokens each routed to ``top_k`` of ``experts`` experts independently.

    An expert is active with probability q = 1 - (1 - k/E)^T; a chip's n = E / p experts hold Binomial(n, q)
    active ones (what a weight-bound decode step reads). Each token sends its k picks to a chip hypergeometrically
    (k of E, n there): mean k n / E, variance k (n/E) (1 - n/E) (E - k) / (E - 1), summed over the T tokens (the
    rows a compute-bound step computes). The most loaded chip: mean + sd x E[max of p normals]
    (:func:`expected_max_normal`), at most all of its n experts / T min(k, n) rows. Qwen3-30B-A3B decode, 8 tokens
    x top-8 of 128 experts over 8 chips: 6.45 active experts per chip on average, 9.24 on the most loaded one
    (f_active 1.43; a simulation of the router gives 1.44, tests/model/test_experts.py). 1 for one chip or
    no tokens.
    """
    p = np.maximum(np.asarray(chips, dtype=float), 1.0)
    t, k, e = float(tokens), float(top_k), float(experts)
    if t <= 0 or e <= 0 or k <= 0:
        return np.ones(p.shape), np.ones(p.shape)
    n = e / p
    z = expected_max_normal(p)
    q = 1.0 - (1.0 - k / e) ** t
    mu_a, sd_a = n * q, np.sqrt(n * q * (1.0 - q))
    f_active = np.where(mu_a > 0, np.minimum(mu_a + z * sd_a, n) / np.maximum(mu_a, 1e-300), 1.0)
    share = n / e
    var_token = k * share * (1.0 - share) * ((e - k) / (e - 1.0) if e > 1 else 0.0)
    mu_r, sd_r = t * k * share, np.sqrt(t * var_token)
    f_rows = np.minimum(mu_r + z * sd_r, t * np.minimum(k, n)) / np.maximum(mu_r, 1e-300)
    one = p <= 1
    return np.where(one, 1.0, f_active), np.where(one, 1.0, f_rows)
