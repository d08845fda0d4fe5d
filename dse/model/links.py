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
    mesh_allreduce_time      a full mesh of direct links (seed 000 "Directional bandwidth": MI355X, 7 xGMI links
                             of 76.8 GB/s, 537.6 GB/s of egress): reduce-scatter and all-gather in one step each
    per_peer_links           which scale-up links are given per peer (lanes x lane rate) rather than as a total
    die_link_bytes           bytes a multi-die package moves over its die-to-die link per operator, by placement
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
    "mesh_allreduce_time",
    "per_peer_links",
    "allreduce_time",
    "die_link_bytes",
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


def mesh_allreduce_time(bytes_, n_peers, bandwidth_per_link, alpha=0.0, count=1.0):
    """All-reduces over p devices of a full mesh (one link to each peer): 2 (count alpha + V / (p R)).

    Reduce-scatter: each device sends its V / p chunk for each peer over that peer's own link, all links at
    once (one step); all-gather the same (seed 000 "Directional bandwidth": 7 xGMI links of 76.8 GB/s, so an
    MI355X moves 537.6 GB/s at once). The ring over the same links takes 2 (p - 1) steps of V / p on one link.
    """
    p = n_peers
    return np.where(p > 1, 2.0 * (count * alpha + bytes_ / (p * bandwidth_per_link)), 0.0)


def per_peer_links(lanes, bandwidth):
    """True where a scale-up link is given as lanes x lane rate (one such link to each of ``peers``), False where
    its ``bandwidth`` is the chip's total (a switch port shared by all peers: NVLink through NVSwitch)."""
    return np.isfinite(np.asarray(lanes, dtype=float)) & ~np.isfinite(np.asarray(bandwidth, dtype=float))


def allreduce_time(bytes_, n_peers, rate, alpha, count, per_peer, peers):
    """The all-reduce time of a tensor-parallel group: over a mesh of direct links where every other device of
    the group has its own link (per-peer links, p - 1 <= peers), else a ring (each device's one rate)."""
    mesh = np.asarray(per_peer, dtype=bool) & (n_peers - 1 <= peers)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mesh, mesh_allreduce_time(bytes_, n_peers, rate, alpha, count),
                        ring_allreduce_time(bytes_, n_peers, rate, alpha, count))


def die_link_bytes(dies, out_bytes, traffic_bytes):
    """(in place, centralized) bytes over a package's die-to-die link per operator (seed 004 §4.5.1).

    In place: each die computes on the data in its own memory (weights and KV split over the dies) and the
    others gather its share of the output, (d - 1) / d of it. Centralized: one die computes and reads the
    other dies' share of the operator's memory traffic over the link, (d - 1) / d of it (the seed's 64 GiB
    split 32 / 32 with all compute on die 0)."""
    frac = (dies - 1.0) / dies
    return out_bytes * frac, traffic_bytes * frac
