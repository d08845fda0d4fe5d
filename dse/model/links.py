"""Links and transfers: alpha-beta time, Little's law, cross-die reads, host upload, collectives.

Pure, numpy-vectorized functions: every argument may be a scalar or an array
and they broadcast; scalars in give floats out. SI units: bytes, seconds,
bytes per second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError

__all__ = [
    "transfer_time",
    "alpha_beta_crossover_bytes",
    "littles_law_bandwidth",
    "transactions_needed",
    "CrossDieRead",
    "cross_die_read_time",
    "compute_in_place_time",
    "HostUpload",
    "host_upload",
    "lane_bandwidth",
    "aggregate_egress",
    "ring_allreduce_time",
]

from dse.model.args import ceil_tol as _ceil, checked as _arr, scalar_or_array as _out  # noqa: E402



# --------------------------------------------------------------- point to point


def transfer_time(bytes_, bandwidth, alpha=0.0):
    """Point-to-point time T = alpha + V / R (seed 004 §4.5.3)."""
    v = _arr("bytes", bytes_)
    r = _arr("bandwidth", bandwidth, positive=True)
    a = _arr("alpha", alpha)
    return _out(a + v / r)


def alpha_beta_crossover_bytes(alpha, bandwidth):
    """Volume where the byte term equals the fixed overhead: V* = alpha R (seed 004 §4.5.3)."""
    return _out(_arr("alpha", alpha) * _arr("bandwidth", bandwidth, positive=True))


# --------------------------------------------------------------- Little's law


def littles_law_bandwidth(in_flight, txn_bytes, latency, interface_bw=np.inf):
    """Effective bandwidth R_eff = min(R_interface, N_o s / L) (seed 004 §4.3.3, Little's law)."""
    n = _arr("in_flight", in_flight)
    s = _arr("txn_bytes", txn_bytes, positive=True)
    lat = _arr("latency", latency, positive=True)
    r = _arr("interface_bw", interface_bw, positive=True)
    return _out(np.minimum(r, n * s / lat))


def transactions_needed(bandwidth, txn_bytes, latency):
    """In-flight transactions to sustain a bandwidth: N_o >= ceil(R L / s) (seed 004 §4.3.3, Example 4-2)."""
    r = _arr("bandwidth", bandwidth)
    s = _arr("txn_bytes", txn_bytes, positive=True)
    lat = _arr("latency", latency)
    return _out(_ceil(r * lat / s))


# --------------------------------------------------------------- dies in one package


@dataclass(frozen=True)
class CrossDieRead:
    """Times of one read stage with compute on one die (floats or arrays, seconds)."""

    local_s: object        # local bytes at local HBM bandwidth
    remote_s: object       # remote bytes at min(remote HBM, die-to-die link)
    time_s: object         # the stage: the two paths overlap, the slower one sets it
    remote_bandwidth: object


def cross_die_read_time(local_bytes, remote_bytes, local_bw, remote_die_bw, link_bw) -> CrossDieRead:
    """Read stage with all compute on one die: max(V_l / R_l, V_r / min(R_remote, R_link)) (seed 004 §4.5.1).

    The remote bytes are read out of the other die's memory and then cross the
    die-to-die link, so they move at the slower of the two; the local and
    cross-die paths use different interfaces and proceed at the same time, so
    the stage takes as long as the slower path. ``link_bw`` is per direction.
    """
    vl = _arr("local_bytes", local_bytes)
    vr = _arr("remote_bytes", remote_bytes)
    rl = _arr("local_bw", local_bw, positive=True)
    rr = np.minimum(_arr("remote_die_bw", remote_die_bw, positive=True), _arr("link_bw", link_bw, positive=True))
    local = vl / rl
    remote = vr / rr
    return CrossDieRead(_out(local), _out(remote), _out(np.maximum(local, remote)), _out(rr))


def compute_in_place_time(bytes_per_die, die_bw, axis=-1):
    """Each die reads its own share at its own bandwidth, in parallel: max_d V_d / R_d (seed 004 §4.5.1).

    ``bytes_per_die`` and ``die_bw`` broadcast; the maximum is taken over
    ``axis`` (the die axis). What crosses the link instead (inputs and
    results) is a separate :func:`transfer_time`; whether it adds depends on
    the computation graph.
    """
    v = _arr("bytes_per_die", bytes_per_die)
    r = _arr("die_bw", die_bw, positive=True)
    return _out(np.max(np.atleast_1d(v / r), axis=axis))


# --------------------------------------------------------------- host link


@dataclass(frozen=True)
class HostUpload:
    """Host-to-device upload vs device reads (floats or arrays)."""

    upload_s: object
    read_s: object
    reuses_to_amortize: object  # smallest R with upload_s / R <= read_s


def host_upload(bytes_, host_bw, device_bw) -> HostUpload:
    """H2D upload V/R_host, one device read V/R_dev, and reuses R >= ceil(R_dev / R_host) to amortize (seed 004 §4.5.2)."""
    v = _arr("bytes", bytes_)
    up = v / _arr("host_bw", host_bw, positive=True)
    rd = v / _arr("device_bw", device_bw, positive=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        reuses = np.where(rd > 0, _ceil(up / np.where(rd > 0, rd, 1.0)), 1.0)
    return HostUpload(_out(up), _out(rd), _out(np.maximum(reuses, 1.0)))


# --------------------------------------------------------------- scale-up links and collectives


def lane_bandwidth(lanes, lane_rate_bits_per_s):
    """One direction of a serial link: lanes x per-lane bit rate / 8 (seed 000 "Directional bandwidth")."""
    return _out(_arr("lanes", lanes) * _arr("lane_rate_bits_per_s", lane_rate_bits_per_s) / 8.0)


def aggregate_egress(peers, per_link_bw):
    """Egress when every peer link sends at once, one direction: peers x per-link bandwidth (seed 000 "Directional bandwidth")."""
    return _out(_arr("peers", peers) * _arr("per_link_bw", per_link_bw))


def ring_allreduce_time(bytes_, n_peers, bandwidth_per_direction, alpha=0.0):
    """Ring all-reduce over p devices: 2 (p - 1) (alpha + V / (p R)) (Patarasuk & Yuan 2009, JPDC 69(2)).

    ``n_peers`` is p, the number of devices in the ring including this one;
    ``bytes_`` is each device's full buffer V. A reduce-scatter then an
    all-gather, each p - 1 steps of V/p bytes per link. p = 1 costs nothing.
    """
    v = _arr("bytes", bytes_)
    p = _arr("n_peers", n_peers, positive=True)
    r = _arr("bandwidth_per_direction", bandwidth_per_direction, positive=True)
    a = _arr("alpha", alpha)
    if np.any(p != np.round(p)):
        raise SpecError(f"n_peers: must be a whole number of devices, got {n_peers!r}")
    return _out(2.0 * (p - 1.0) * (a + v / (p * r)))
