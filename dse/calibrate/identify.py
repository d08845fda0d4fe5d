"""Identifiability: which free knobs the measurements determine, and the message when they do not.

Because of the max()es a knob can be felt on one side of a kink and not on the other, so this is checked
with one-sided differences and confirmed by evaluating the move (see dse.calibrate.fit, "Honesty rules").
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dse.calibrate.knobs import FRACTIONS, IDEAL, KNOBS, OVERHEADS, _fix_text, format_knob
from dse.calibrate.problem import _FRACTION_FLOOR, _Problem

_FLAT_REL = 1e-3   # a direction is flat when it moves no residual by more than this share of its knobs' own effects
_FLAT_ABS = 1e-9   # ... or by more than this (relative residual), whichever is larger
_SWEEP = 101       # points per sweep when bracketing the range a knob is flat over


def _one_sided(prob: _Problem, z: np.ndarray) -> dict:
    """Residuals at ``z`` and one-sided difference quotients (the model is only piecewise smooth: max(device,
    launches), max(matrix, vector, memory)): ``Jp[:, j]`` moving knob j up, ``Jm[:, j]`` moving it down, and which
    of the two moves stay within the physical bounds."""
    f = len(z)
    h = 1e-5 * np.maximum(1.0, np.abs(z))
    R = prob.residuals(np.concatenate([z[None], z[None] + np.diag(h), z[None] - np.diag(h)]))
    r0 = R[0]
    up = np.ones(f, dtype=bool)
    down = np.ones(f, dtype=bool)
    for j, k in enumerate(prob.free):
        if k in FRACTIONS:
            up[j] = z[j] < -1e-9  # a fraction on 1 cannot go up
            down[j] = z[j] > math.log(_FRACTION_FLOOR) + 1e-9
        else:
            down[j] = z[j] > 1e-9  # an overhead on 0 cannot go down
    Jp = ((R[1:f + 1] - r0) / h[:, None]).T
    Jm = ((r0 - R[f + 1:]) / h[:, None]).T
    cols = [Jp[:, j] for j in range(f) if up[j]] + [Jm[:, j] for j in range(f) if down[j]]
    scale = max([float(np.linalg.norm(c)) for c in cols] + [1e-300])
    return {"r0": r0, "Jp": Jp, "Jm": Jm, "up": up, "down": down, "scale": scale}


def _flat_directions(prob: _Problem, z: np.ndarray, J: dict, cols: list[int]) -> list[np.ndarray]:
    """Feasible directions in the knobs ``cols`` along which no measured time changes (each a (f,) vector in z).

    Per orthant of the move (each knob up or down) the one-sided columns form a Jacobian; its null vectors that
    point into that orthant are candidates, kept only if moving along them really leaves every residual
    unchanged (evaluated, not assumed: a kink that is not aligned with the axes would fool the linear algebra)."""
    f = len(z)
    Jp, Jm, up, down = J["Jp"], J["Jm"], J["up"], J["down"]
    cands: list[np.ndarray] = []
    for signs in itertools.product((1, -1), repeat=len(cols)):
        if any((s > 0 and not up[c]) or (s < 0 and not down[c]) for s, c in zip(signs, cols)):
            continue
        M = np.stack([Jp[:, c] if s > 0 else Jm[:, c] for s, c in zip(signs, cols)], axis=1)
        norms = np.linalg.norm(M, axis=0)
        zero = norms <= max(1e-7 * J["scale"], 1e-12)
        for i in np.flatnonzero(zero):  # a column without effect: the single-knob move is a candidate
            d = np.zeros(f)
            d[cols[i]] = signs[i]
            cands.append(d)
        nz = np.flatnonzero(~zero)
        if len(nz) < 2:
            continue
        Mn = M[:, nz] / norms[nz]
        _, s, vt = np.linalg.svd(Mn, full_matrices=True)
        s = np.concatenate([s, np.zeros(len(nz) - len(s))])
        for v in vt[s <= 1e-6 * max(s.max(), 1e-300)]:
            dv = v / norms[nz]
            dv = np.where(np.abs(dv) > 1e-6 * np.abs(dv).max(), dv, 0.0)
            sg = np.array([signs[i] for i in nz])
            for cand in (dv, -dv):
                if np.all(cand * sg >= 0):
                    d = np.zeros(f)
                    d[[cols[i] for i in nz]] = cand
                    cands.append(d)
                    break
    if not cands:
        return []
    uniq: list[np.ndarray] = []
    for d in cands:
        d = d / np.abs(d).max()
        if not any(np.allclose(d, u, atol=1e-6) for u in uniq):
            uniq.append(d)
    step = 1e-4
    R = prob.residuals(z[None] + step * np.array(uniq))
    out = []
    for d, r in zip(uniq, R):
        own = sum(abs(d[c]) * step * np.linalg.norm(J["Jp"][:, c] if d[c] > 0 else J["Jm"][:, c])
                  for c in range(f) if d[c] != 0)
        if np.linalg.norm(r - J["r0"]) <= max(_FLAT_REL * own, _FLAT_ABS):
            out.append(d)
    return out


def _flat_range(prob: _Problem, z: np.ndarray, j: int, r0: np.ndarray) -> tuple[float, float]:
    """The values of knob ``j`` (the other knobs at ``z``) that leave every residual as at ``z``: the interval
    around the fitted value, within the physical range (bracketed by a sweep and one refinement)."""
    k = prob.free[j]
    if k in FRACTIONS:
        lo, hi = math.log(_FRACTION_FLOOR), 0.0
    else:
        per = prob.launches if k == "kernel_overhead" else np.ones_like(prob.meas)
        lo, hi = 0.0, float(np.max(prob.meas / per)) / prob.scale
    ends = []
    for edge in (lo, hi):
        a, b = z[j], edge
        for _ in range(2):
            xs = np.linspace(a, b, _SWEEP)[1:]
            zs = np.repeat(z[None], len(xs), axis=0)
            zs[:, j] = xs
            flat = np.max(np.abs(prob.residuals(zs) - r0), axis=1) <= _FLAT_ABS
            first = int(np.argmax(~flat)) if not flat.all() else len(xs)
            if first == len(xs):
                a = b
                break
            a, b = (xs[first - 1] if first else a), xs[first]
        ends.append(a)
    v = prob.theta(np.array([[ends[0] if i == j else z[i] for i in range(len(z))],
                             [ends[1] if i == j else z[i] for i in range(len(z))]]))[:, KNOBS.index(k)]
    return float(v[0]), float(v[1])


def _identify(prob: _Problem, z: np.ndarray) -> dict:
    """Which free knobs the measurements determine at ``z``.

    The step time is a max (device work against host launches, matrix against memory), so a knob can move the
    fit on one side of a kink and nothing on the other. A knob is *unseen* when a feasible move of it alone
    changes no measured time (every value over a range fits the same); knobs are *entangled* when a move of
    several together changes none. ``to_fix``: the unseen knobs, then (keeping knobs in KNOBS order while no
    flat move appears among the kept ones) the entangled knobs that must be fixed.
    """
    J = _one_sided(prob, z)
    f = len(z)
    unseen: dict[str, tuple[float, float]] = {}
    for j in range(f):
        moves = _flat_directions(prob, z, J, [j])
        flat_up = any(d[j] > 0 for d in moves)
        flat_down = any(d[j] < 0 for d in moves)
        if flat_up or flat_down:
            unseen[prob.free[j]] = _flat_range(prob, z, j, J["r0"])
    rest = [j for j in range(f) if prob.free[j] not in unseen]
    keep: list[int] = []
    for j in rest:
        if not _flat_directions(prob, z, J, keep + [j]):
            keep.append(j)
    entangled: list[str] = []
    if len(keep) < len(rest):
        for d in _flat_directions(prob, z, J, rest):
            entangled += [prob.free[j] for j in rest if d[j] != 0 and prob.free[j] not in entangled]
    entangled = [k for k in KNOBS if k in entangled]
    to_fix = [prob.free[j] for j in range(f) if j not in keep]
    return {"rank": len(keep), "unseen": unseen, "entangled": entangled, "to_fix": to_fix,
            "states": prob.states(prob.theta(z)[0])}


def _not_identified_message(prob: _Problem, info: dict, chip: str, n: int, few: bool) -> list[str]:
    """The refusal of a fit whose knobs the measurements do not determine: a headline, then indented lines (a
    SpecError's problems: each on a line of its own; one string with line breaks would show them escaped)."""
    distinct = len(prob.workloads)
    where = "with the ideal knobs" if few else "at the fit"
    head = (f"cannot calibrate {chip}: {n} measurement{'s' if n != 1 else ''} ({distinct} distinct "
            f"workload{'s' if distinct != 1 else ''}) for {len(prob.free)} free knobs "
            f"({', '.join(prob.free)})")
    lines = [head + (": fewer measurements than free knobs" if few else
                     f": they determine only {info['rank']} of them")]
    counts: dict[str, int] = {}
    for s in info["states"]:
        counts[s] = counts.get(s, 0) + 1
    launch = (" (launch-bound: the host's kernel launches outlast the device work; the step takes "
              "max(device work, launches x kernel_overhead) + step_overhead)") if "launch-bound" in counts else ""
    lines.append(f"  {where}: " + ", ".join(f"{c} row{'s' if c != 1 else ''} {s}" for s, c in counts.items())
                 + launch)
    suggest: dict[str, float] = {}
    for k, (lo, hi) in info["unseen"].items():
        rng = (f"every value from {format_knob(k, lo)} to {format_knob(k, hi)} fits the same"
               if hi - lo > 1e-12 * max(1.0, abs(hi)) else f"it has no effect at {format_knob(k, lo)}")
        lines.append(f"  {k} cannot be identified: {where}, no measured time depends on it: {rng}")
        suggest[k] = IDEAL[k] if lo - 1e-15 <= IDEAL[k] <= hi + 1e-15 else (lo if k in OVERHEADS else hi)
    ent = info["entangled"]
    both = {"kernel_overhead", "step_overhead"}
    if both <= set(prob.free) and len(set(prob.launches)) == 1 and (both <= set(ent) or both & set(info["unseen"])):
        L = int(prob.launches[0])
        lines.append(f"  kernel and step overhead cannot be told apart: every measured step launches the same number "
                     f"of kernels, {L}, so on every row kernel_overhead either has no effect (device-bound) or adds "
                     "exactly as step_overhead does (launch-bound); only rows on both sides of the max, with device "
                     "times the other knobs pin down, would separate them")
    if ent:
        lines.append(f"  {', '.join(ent)} cannot be identified separately")
    fix = list(info["to_fix"])
    need = len(prob.free) - n if few else 0
    for k in reversed(prob.free):  # fewer rows than knobs: fix at least that many, the last knobs first
        if len(fix) >= need:
            break
        if k not in fix:
            fix.append(k)
    fix = [k for k in KNOBS if k in fix]
    if fix:
        vals = {k: suggest.get(k, IDEAL[k]) for k in fix}
        lines.append("  fix " + ("it" if len(fix) == 1 else "them") + " with --fix knob=value, e.g. "
                     + " ".join(f"--fix {k}={_fix_text(k, vals[k])}" for k in fix)
                     + (" (the ideal value" + ("s" if len(fix) > 1 else "") if all(vals[k] == IDEAL[k] for k in fix)
                        else " (a value these measurements cannot rule out")
                     + "), or add measurements that separate them")
    return lines
