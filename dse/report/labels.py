"""Point labels on the PNG plots that do not overlap: a greedy pass over label boxes measured by the renderer.

Each label is tried at offsets around its point, nearest first (upper right, then the other directions, at
growing distance); it takes the first place whose box, as matplotlib will draw it, overlaps no label placed
before it, no marker of a labelled point, none of the boxes to avoid (the legend, a note) and stays inside the
axes. A label that had to move away from its point gets a thin leader line to it. When no place is free the
label goes where it overlaps least (and still gets its line).

Used by :mod:`dse.report.plots` for the catalog chips and the front's categorical values (number formats).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: distances from the point to the label's near edge, in points (the first one needs no leader line)
_RADII_PT = (3.0, 8.0, 14.0, 22.0, 32.0, 44.0, 58.0, 76.0)
#: directions tried at each distance (degrees; upper right first: where labels used to be)
_ANGLES = (45, 90, 0, 135, 180, -45, -90, -135, 22, 68, 112, 158, -22, -68, -112, -158)


@dataclass
class Label:
    """One label: the point (data coordinates), its text and how the text is drawn."""

    x: float
    y: float
    text: str
    style: dict = field(default_factory=dict)  # Text keyword arguments (fontsize, color, ...)
    marker_pt: float = 10.0  # the point's marker size (points across): labels keep off it


def _box(ax_x: float, ax_y: float, w: float, h: float, ha: str, va: str) -> tuple[float, float, float, float]:
    x0 = ax_x - {"left": 0.0, "center": w / 2, "right": w}[ha]
    y0 = ax_y - {"bottom": 0.0, "center": h / 2, "top": h}[va]
    return (x0, y0, x0 + w, y0 + h)


def _overlap(a, b) -> float:
    """Area shared by two boxes (x0, y0, x1, y1)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _inside(a, frame) -> bool:
    return a[0] >= frame[0] and a[1] >= frame[1] and a[2] <= frame[2] and a[3] <= frame[3]


def _extent(bbox) -> tuple[float, float, float, float]:
    return (float(bbox.x0), float(bbox.y0), float(bbox.x1), float(bbox.y1))


def freeze_legend(ax) -> None:
    """Keep the axes' legend where it was drawn ('best' would move it again once labels exist)."""
    leg = ax.get_legend()
    if leg is None:
        return
    fig = ax.figure
    bb = leg.get_window_extent(fig.canvas.get_renderer()).transformed(ax.transAxes.inverted())
    leg.set_loc((float(bb.x0), float(bb.y0)))


@dataclass
class Place:
    """Where a label goes: its anchor (display pixels), its alignment there, its box and whether it moved
    away from its point (``far``: it needs a leader line)."""

    x: float
    y: float
    ha: str
    va: str
    box: tuple[float, float, float, float]
    far: bool


def greedy_places(pts: np.ndarray, sizes: Sequence[tuple[float, float]], marker_px: Sequence[float],
                  frame: tuple[float, float, float, float], taken: Sequence = (), dots: np.ndarray | None = None,
                  px_per_pt: float = 1.0) -> list[Place]:
    """The place of each label (pixels, y up) so that no two boxes overlap, none overlaps a box in ``taken``
    nor leaves ``frame``, and few cover a labelled marker or one of ``dots``; the renderer-free core of
    :func:`place_labels` (the interactive report uses it with estimated text sizes)."""
    pts = np.asarray(pts, dtype=float).reshape(-1, 2)
    dots = np.empty((0, 2)) if dots is None else np.asarray(dots, dtype=float).reshape(-1, 2)
    dots = dots[np.isfinite(dots).all(axis=1)]
    markers = [(x - r / 2, y - r / 2, x + r / 2, y + r / 2) for (x, y), r in zip(pts, marker_px)]
    taken = list(taken)
    # crowded points first: they have the fewest free places
    dist = np.hypot(*(pts[:, None, :] - pts[None, :, :]).transpose(2, 0, 1)) if len(pts) > 1 else np.zeros((1, 1))
    np.fill_diagonal(dist, np.inf)
    order = sorted(range(len(pts)), key=lambda i: (float(dist[i].min()), i))
    out: list = [None] * len(pts)
    placed: list[tuple[float, float, float, float]] = []
    for i in order:
        p, (w, h) = pts[i], sizes[i]
        best = None
        for k, r_pt in enumerate(_RADII_PT):
            for ang in _ANGLES:
                c, s = math.cos(math.radians(ang)), math.sin(math.radians(ang))
                ha = "left" if c > 0.3 else "right" if c < -0.3 else "center"
                va = "bottom" if s > 0.3 else "top" if s < -0.3 else "center"
                r = r_pt * px_per_pt + marker_px[i] / 2
                ax_x, ax_y = p[0] + r * c, p[1] + r * s
                box = _box(ax_x, ax_y, w, h, ha, va)
                if not _inside(box, frame):
                    continue
                hard = sum(_overlap(box, q) for q in placed) + sum(_overlap(box, q) for q in taken)
                soft = sum(_overlap(box, q) for j, q in enumerate(markers) if j != i)
                covered = int(((dots[:, 0] >= box[0]) & (dots[:, 0] <= box[2]) & (dots[:, 1] >= box[1])
                               & (dots[:, 1] <= box[3])).sum())
                score = (hard > 0, soft > 0, covered + k, hard + soft)
                if best is None or score < best[0]:
                    best = (score, Place(ax_x, ax_y, ha, va, box, k > 0))
                if not hard and not soft and not covered:
                    break
            if best is not None and best[0][:2] == (False, False) and best[0][2] <= k:
                break
        if best is None:  # no place inside the frame at all (a tiny plot): next to the point
            x0, y0 = p[0] + 3 * px_per_pt, p[1] + 3 * px_per_pt
            best = (None, Place(x0, y0, "left", "bottom", _box(x0, y0, w, h, "left", "bottom"), False))
        placed.append(best[1].box)
        out[i] = best[1]
    return out


def place_labels(ax, labels: Sequence[Label], avoid: Iterable = (), points=None, pad_px: float = 1.5) -> list:
    """Annotate ``labels`` on ``ax`` without overlaps; returns the annotations (in the order given).

    ``avoid``: artists whose drawn boxes the labels keep off (the legend, a note). ``points``: (x, y) arrays
    of the other points drawn (the designs): a label covers as few of them as it can without going far.
    Call it once the axes are complete (scales, limits, legend): the figure is drawn here to measure.
    """
    if not labels:
        return []
    fig = ax.figure
    fig.canvas.draw()  # lays the figure out (constrained layout, legend 'best'): display coordinates are final
    freeze_legend(ax)
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0
    frame = _extent(ax.get_window_extent(renderer))
    frame = (frame[0] + 2, frame[1] + 2, frame[2] - 2, frame[3] - 2)
    taken = [_extent(a.get_window_extent(renderer)) for a in avoid if a is not None and a.get_visible()]
    pts = ax.transData.transform(np.column_stack([[lb.x for lb in labels], [lb.y for lb in labels]]))
    dots = None
    if points is not None:
        dots = ax.transData.transform(np.column_stack([np.asarray(points[0], float), np.asarray(points[1], float)]))
    sizes = []
    for lb in labels:  # each text's box as the renderer draws it
        probe = ax.annotate(lb.text, (lb.x, lb.y), xytext=(0, 0), textcoords="offset points", **lb.style)
        e = probe.get_window_extent(renderer)
        probe.remove()
        sizes.append((float(e.width) + 2 * pad_px, float(e.height) + 2 * pad_px))
    places = greedy_places(pts, sizes, [lb.marker_pt * px for lb in labels], frame, taken, dots, px_per_pt=px)
    out = []
    for lb, p, pl in zip(labels, pts, places):
        off = ((pl.x - p[0]) / px, (pl.y - p[1]) / px)
        kw = dict(lb.style)
        if pl.far:  # away from its point: a leader line from the label to the marker
            kw["arrowprops"] = dict(arrowstyle="-", color=kw.get("color", "0.35"), lw=0.6, alpha=0.8,
                                    shrinkA=1, shrinkB=lb.marker_pt / 2)
        ann = ax.annotate(lb.text, (lb.x, lb.y), xytext=off, textcoords="offset points", ha=pl.ha, va=pl.va, **kw)
        ann.set_in_layout(False)
        out.append(ann)
    return out


def text_boxes(fig, texts) -> list:
    """The drawn boxes (display pixels) of texts or annotations; an annotation's text only, not its line."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [Text.get_window_extent(t, renderer) for t in texts]
