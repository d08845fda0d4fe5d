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
    direct_allreduce_time    the same two steps through a switch port (every peer one hop away)
    tree_allreduce_time      binomial-tree reduce then broadcast, 2 ceil(log2 p) steps of the whole V
                             (Thakur, Rabenseifner & Gropp 2005, IJHPCA 19(1), Table 1)
    alltoall_time            all-to-all (MoE dispatch and combine): direct over a mesh or a switch, (p - 1) steps
                             around a ring
    collective               the cheapest algorithm the topology has (ring / tree / direct), seed 004 §4.5.3's
                             alpha + V / R per step
    torus_sides, torus_ring_steps   a torus's sides and the steps of its dimension-ordered rings (Chan, Heimlich,
                             Purkayastha & van de Geijn 2007, CCPE 19(13): bucket algorithms per dimension)
    topology_code, links_per_chip   the scale-up topology (switch, mesh, ring, torus) and its links per chip
    per_peer_links           which scale-up links are given per peer (lanes x lane rate) rather than as a total
    die_link_bytes           bytes a multi-die package moves over its die-to-die link per operator, by placement
    interface_bandwidth      seed 004 §4.1.3 (HBM stack: 1024 pins x pin rate / 8)
"""

from __future__ import annotations

import numpy as np

from dse.model import jit

__all__ = [
    "interface_bandwidth",
    "transfer_time",
    "effective_bandwidth",
    "ring_allreduce_time",
    "ring_allreduce_bytes",
    "mesh_allreduce_time",
    "per_peer_links",
    "allreduce_time",
    "direct_allreduce_time",
    "tree_allreduce_time",
    "alltoall_time",
    "collective",
    "torus_sides",
    "torus_ring_steps",
    "TOPOLOGIES",
    "ALGORITHMS",
    "topology_code",
    "links_per_chip",
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
        return little_bandwidth(interface_bw, in_flight, txn_bytes, latency)


@jit.rule
def little_bandwidth(interface_bw, in_flight, txn_bytes, latency):
    """:func:`effective_bandwidth`'s rule (numbers in kernels, arrays in Python, unchecked)."""
    cap = jit.where((latency > 0) & (in_flight > 0), in_flight * txn_bytes / latency, np.inf)
    return jit.minimum(interface_bw, cap)


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


#: Scale-up topologies by code (``links.scale_up.topology``): a switch port of the chip's total rate (NVLink
#: through NVSwitch), a full mesh of one link per peer (MI355X's 7 xGMI links), a bidirectional ring (a link to
#: each neighbour), a torus (``peers`` = 2 links per dimension, TPU ICI, Trainium2 NeuronLink).
TOPOLOGIES = ("switch", "mesh", "ring", "torus")
SWITCH, MESH, RING, TORUS = range(4)
#: Collective algorithms by code (the ``*_algorithm`` columns of the evaluator).
ALGORITHMS = ("ring", "tree", "direct")
_RING, _TREE, _DIRECT = range(3)


def topology_code(topology, lanes, bandwidth):
    """The topology code of :data:`TOPOLOGIES`: as given (a code, NaN or None: not given), else inferred as before
    the field existed: links given per peer (lanes x lane rate) are a mesh, a bandwidth is a switch total."""
    inferred = np.where(per_peer_links(lanes, bandwidth), float(MESH), float(SWITCH))
    if topology is None:  # (none given: the inference alone)
        return inferred
    given = np.asarray(topology, dtype=float)
    return np.where(np.isnan(given), inferred, given)


def links_per_chip(topology, peers):
    """Links a chip drives at the link rate at once: a switch port is one (its rate is the total), a mesh or a
    torus has one per peer, a ring two (one to each neighbour). The chip's egress is rate x this."""
    t = np.asarray(topology, dtype=float)
    return np.where(t == SWITCH, 1.0, np.where(t == RING, 2.0, peers))


def direct_allreduce_time(bytes_, n_peers, rate, alpha=0.0, count=1.0, switch=True):
    """Reduce-scatter then all-gather in one step each, every peer one hop away: 2 (count alpha + V (p - 1) / (p R))
    through a switch port of rate R (the p - 1 chunks of V / p share it), 2 (count alpha + V / (p R)) over a mesh
    (each chunk on its own link; :func:`mesh_allreduce_time`). p = 1 costs nothing."""
    p = n_peers
    per_step = np.where(switch, (p - 1.0) / p, 1.0 / p) * bytes_ / rate
    return np.where(p > 1, 2.0 * (count * alpha + per_step), 0.0)


def tree_allreduce_time(bytes_, n_peers, rate, alpha=0.0, count=1.0):
    """A binomial tree reduces to one device and broadcasts back, the whole V on each of ceil(log2 p) levels both
    ways: 2 ceil(log2 p) (count alpha + V / R) (Thakur, Rabenseifner & Gropp 2005, Table 1). p = 1 costs nothing."""
    levels = np.ceil(np.log2(np.maximum(n_peers, 1.0)))
    return 2.0 * levels * (count * alpha + bytes_ / rate)


def alltoall_time(bytes_, n_peers, rate, alpha=0.0, count=1.0, topology=SWITCH, peers=np.inf):
    """All-to-all over p devices, ``bytes_`` V the bytes each device sends to the others in all (V / (p - 1) to
    each; summed over ``count`` all-to-alls): (time, bytes over links in all).

    Mesh (a link to each of the p - 1 others): one step, each block on its own link, count alpha + V / ((p - 1) R).
    Switch (the others within its ``peers``): one step through the port, count alpha + V / R. Otherwise (a ring, a
    mesh with fewer links than peers) around a ring in p - 1 steps: step j passes on the p - j blocks not yet
    home, each split between the two directions where the ring has both, (p - 1) count alpha + V p / (2 d R),
    d = 2 directions on a ring or torus, 1 else. A torus runs that ring along each dimension in turn
    (dimension-ordered routing, :func:`torus_sides`): along a side of n each chip passes on the (n - 1) / n of its
    p blocks of V / (p - 1) bound elsewhere on that side, so with s = sum (n - 1) (:func:`torus_ring_steps`; p - 1
    for one dimension): s count alpha + V p s / ((p - 1) 2 d R). The link bytes count each hop: p V direct,
    p^2 V / 2 on the ring, p^2 V s / (2 (p - 1)) on the torus.
    """
    p = np.asarray(n_peers, dtype=float)
    t = np.asarray(topology, dtype=float)
    one_hop = (p - 1.0 <= peers) & ((t == SWITCH) | (t == MESH))
    dirs = np.where((t == RING) | (t == TORUS), 2.0, 1.0)
    steps = p - 1.0
    torus = t == TORUS
    if np.any(torus & (p > 1)):
        steps = np.where(torus, torus_ring_steps(np.where(torus, p, 1.0), np.where(torus, peers, 2.0)), steps)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = count * alpha + bytes_ / (rate * np.where(t == MESH, np.maximum(p - 1.0, 1.0), 1.0))
        share = steps / np.maximum(p - 1.0, 1.0)  # 1 on a ring
        ring = steps * count * alpha + bytes_ * p * share / (2.0 * dirs * rate)
    time = np.where(p > 1, np.where(one_hop, direct, ring), 0.0)
    moved = np.where(p > 1, np.where(one_hop, p * bytes_, p * p * bytes_ * share / 2.0), 0.0)
    return time, moved


def torus_sides(p: int, dims: int) -> tuple[int, ...]:
    """The sides of a ``dims``-dimensional torus of ``p`` chips, as even as whole numbers allow (their product is
    p): 16 chips in 2 dimensions 4 x 4, 8 in 3 dimensions 2 x 2 x 2, 8 in 2 dimensions 4 x 2, a prime count a
    ring (p x 1 ...). The TP group is assumed to be the most compact block of the torus."""
    p, dims = max(int(p), 1), max(int(dims), 1)
    if dims == 1 or p == 1:
        return (p,) + (1,) * (dims - 1)
    target = p ** (1.0 / dims)
    divisors = [d for d in range(1, p + 1) if p % d == 0]
    side = min(divisors, key=lambda d: (abs(np.log(d / target)), -d))
    return tuple(sorted((side,) + torus_sides(p // side, dims - 1), reverse=True))


def torus_ring_steps(n_peers, peers):
    """Steps of one reduce-scatter by dimension-ordered bidirectional rings on a torus with ``peers`` links per
    chip (peers / 2 dimensions): sum over the dimensions of (side - 1) (:func:`torus_sides`). Each dimension's
    ring scatters what the previous ones left, so the bytes per link add up to (p - 1) / p V, as on one ring of
    all p chips, in fewer steps: 4 x 4 chips 6 steps instead of 15. Vectorized over arrays of p and peers."""
    p, k = np.broadcast_arrays(np.asarray(n_peers, dtype=float),
                               np.maximum(np.floor(np.asarray(peers, dtype=float) / 2.0), 1.0))
    ok = np.isfinite(p) & (p >= 1) & (p == np.floor(p)) & np.isfinite(k)
    keys = np.stack([np.where(ok, p, 1.0).ravel(), np.where(ok, k, 1.0).ravel()])
    pairs, inv = np.unique(keys, axis=1, return_inverse=True)  # (a few distinct systems per batch)
    steps = np.array([float(sum(n - 1 for n in torus_sides(int(a), int(b)))) for a, b in pairs.T])
    return np.where(ok, steps[np.ravel(inv)].reshape(p.shape), p - 1.0)


def collective(kind: str, bytes_, n_peers, rate, alpha, count, topology, peers):
    """(time, algorithm code) of the cheapest algorithm the topology has for ``count`` collectives of ``kind``
    ('all_reduce', 'reduce_scatter', 'all_gather'), ``bytes_`` V each device's buffer summed over them; each
    step alpha + bytes / R (seed 004 §4.5.3). Algorithms (:data:`ALGORITHMS`):

    ring    always: reduce-scatter and all-gather p - 1 steps of V / p each; a ring or torus runs two rings in
            opposite directions with half the data each (twice the rate); a torus runs them dimension by
            dimension (:func:`torus_ring_steps`): the same bytes in fewer steps
    direct  every other device one hop away (a switch, or a mesh with a link to each, p - 1 <= ``peers``):
            one step each way (:func:`direct_allreduce_time`)
    tree    all-reduce only: :func:`tree_allreduce_time`, on a switch or a mesh within its peers, and on a ring
            or torus whose links route through the chips between (each level's pairs hold disjoint stretches
            of the ring, so every pair has a path of its own at the link rate); not on a mesh of fewer links
            than peers (its links reach no farther than its own node)

    Small buffers are alpha-bound (seed 004 §4.5.3: below V* = alpha R, 879 KiB on H100 NVLink, the fixed
    overhead dominates), so the algorithm with the fewest steps wins there and the one moving the fewest bytes
    above; a reduce-scatter or all-gather is half of the all-reduce's ring or direct steps.
    """
    p = np.asarray(n_peers, dtype=float)
    t = np.asarray(topology, dtype=float)
    half = 0.5 if kind in ("reduce_scatter", "all_gather") else 1.0
    if half == 1.0 and kind != "all_reduce":
        raise ValueError(f"collective: unknown kind {kind!r}")
    within = p - 1.0 <= peers
    direct_ok = within & ((t == SWITCH) | (t == MESH))
    tree_ok = (half == 1.0) & ((((t == SWITCH) | (t == MESH)) & within) | (t == RING) | (t == TORUS))
    ring_rate = rate * np.where((t == RING) | (t == TORUS), 2.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ring = half * ring_allreduce_time(bytes_, p, ring_rate, alpha, count)
        torus = t == TORUS
        if np.any(torus & (p > 1)):  # the alphas of the dimension-ordered rings: sum (side - 1) steps each way
            steps = torus_ring_steps(np.where(torus, p, 1.0), np.where(torus, peers, 2.0))
            ring = np.where(torus, ring - half * 2.0 * (p - 1.0 - steps) * count * alpha, ring)
        direct = np.where(direct_ok, half * direct_allreduce_time(bytes_, p, rate, alpha, count, t == SWITCH),
                          np.inf)
        tree = np.where(tree_ok, tree_allreduce_time(bytes_, p, rate, alpha, count), np.inf)
    best = np.minimum(ring, np.minimum(tree, direct))
    algo = np.where(best == ring, _RING, np.where(best == direct, _DIRECT, _TREE))
    best = np.where(p > 1, best, 0.0)
    return best, np.where(p > 1, algo, _RING)


def allreduce_time(bytes_, n_peers, rate, alpha, count, topology, peers):
    """The all-reduce time of a tensor-parallel group by the cheapest algorithm its topology has
    (:func:`collective`); ``topology`` a code of :data:`TOPOLOGIES` (True / False: links per peer, a mesh, or a
    switch total, as :func:`per_peer_links` says)."""
    return collective("all_reduce", bytes_, n_peers, rate, alpha, count, topology, peers)[0]


def die_link_bytes(dies, out_bytes, traffic_bytes):
    """(in place, centralized) bytes over a package's die-to-die link per operator (seed 004 §4.5.1).

    In place: each die computes on the data in its own memory (weights and KV split over the dies) and the
    others gather its share of the output, (d - 1) / d of it. Centralized: one die computes and reads the
    other dies' share of the operator's memory traffic over the link, (d - 1) / d of it (the seed's 64 GiB
    split 32 / 32 with all compute on die 0)."""
    frac = (dies - 1.0) / dies
    return out_bytes * frac, traffic_bytes * frac
