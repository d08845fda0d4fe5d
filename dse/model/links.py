"""Links and memory interfaces: alpha-beta transfer time, Little's law, ring all-reduce.

Each rule lives here once; the evaluator (dse/model/evaluator.py) and the CP-SAT data steps
(dse/solvers/cpsat_tiles.py, dse/solvers/cpsat_split.py) call these functions. Pure, unchecked,
numpy-vectorized cores (the evaluator's inner loop calls them): every argument may be a scalar or an
array and they broadcast. SI units: bytes, seconds, bytes per second.

Sources:
    transfer_time            seed 004 §4.5.3 (T = alpha + V / R)
    effective_bandwidth      seed 004 §4.3.3 (Little's law, Example 4-2)
    ring_allreduce_time      Patarasuk & Yuan 2009, JPDC 69(2); seed 004 §4.5.3 (alpha + V / R per step)
    ring_allreduce_bytes     the same ring: 2 (p - 1) chunks of V / p from each of p devices
    interface_bandwidth      seed 004 §4.1.3 (HBM stack: 1024 pins x pin rate / 8)
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "interface_bandwidth",
    "transfer_time",
    "effective_bandwidth",
    "ring_allreduce_time",
    "ring_allreduce_bytes",
]


def interface_bandwidth(pins, pin_rate_bytes_per_s):
    """B/s of one memory interface: pins x pin rate / 8 (seed 004 §4.1.3: an HBM3 stack of 1024 pins at
    5.24 Gb/s, 671 GB/s). ``pin_rate_bytes_per_s`` is already in bytes ("5.24 Gb/s" parses to 0.655e9 B/s),
    so the /8 is in it."""
    return pins * pin_rate_bytes_per_s


def transfer_time(bytes_, bandwidth, alpha=0.0):
    """Point-to-point time T = alpha + V / R (seed 004 §4.5.3); NaN bandwidth (no link) gives NaN."""
    return alpha + bytes_ / bandwidth


def effective_bandwidth(interface_bw, in_flight, txn_bytes, latency):
    """R_eff = min(R_interface, N_o s / L) (seed 004 §4.3.3, Little's law).

    ``in_flight`` transactions of ``txn_bytes`` each, ``latency`` seconds; where the latency or the
    in-flight count is 0 (not stated) the interface alone sets the bandwidth. 128 transactions of 128 B
    at 500 ns: 32.8 GB/s whatever the interface; 4,096: 1,049 GB/s, so a 1,008 GB/s interface is the limit.
    """
    latency = np.asarray(latency, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where((latency > 0) & (in_flight > 0), in_flight * txn_bytes / latency, np.inf)
    return np.minimum(interface_bw, cap)


def ring_allreduce_time(bytes_, n_peers, bandwidth_per_direction, alpha=0.0, count=1.0):
    """Ring all-reduces over p devices: 2 (p - 1) (count alpha + V / (p R)) (Patarasuk & Yuan 2009).

    ``n_peers`` is p, the devices in the ring including this one; ``bytes_`` each device's buffer V,
    summed over the ``count`` all-reduces (each a reduce-scatter then an all-gather, p - 1 steps of
    V / p per link, each step alpha + bytes / R, seed 004 §4.5.3). p = 1 costs nothing.
    """
    p = n_peers
    return 2.0 * (p - 1.0) * (count * alpha + bytes_ / (p * bandwidth_per_direction))


def ring_allreduce_bytes(bytes_, n_peers):
    """Bytes the ring moves over all its links: each of p devices sends 2 (p - 1) chunks of V / p,
    2 (p - 1) V in all (the link energy counts these)."""
    return 2.0 * (n_peers - 1.0) * bytes_
