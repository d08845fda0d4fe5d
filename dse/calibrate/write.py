"""Writing a calibrated chip: the chip's YAML file with its ``calibration:`` section replaced by the fit."""

from __future__ import annotations

import json
from pathlib import Path

from dse.calibrate.knobs import RESIDUAL_KIND, format_knob
from dse.calibrate.result import CalibrationFit
from dse.errors import DseError
from dse.fileio import output_file


def calibrated_yaml(fit: CalibrationFit) -> str:
    """The chip file the fit started from, with its ``calibration:`` section replaced by the fitted one.

    Comments and every other line are kept; values are written at full
    precision so the file evaluates to exactly the fitted predictions.
    """
    path = fit.chip_path
    if path is None:
        raise DseError("writing a calibrated chip needs the chip's YAML file: calibrate a catalog name or a chip file")
    text = Path(path).read_text(encoding="utf-8")
    text = _drop_top_level_key(text, "calibration")
    c = fit.chip.calibration
    lines = [
        "",
        f"# calibration: fitted by `dse calibrate` to {fit.measurements_file or 'measurements'}",
        f"#   least squares on {RESIDUAL_KIND}; RMS {fit.rms:.1%}, max {fit.max_abs:.1%};"
        f" leave-one-out {fit.loo_text()}",
    ]
    for b in fit.active:
        lines.append(f"#   bound active: {b.text()}")
    lines += [
        "calibration:",
        f"  compute_efficiency: {c.compute_efficiency!r}",
        f"  bandwidth_efficiency: {c.bandwidth_efficiency!r}",
        f"  kernel_overhead: {c.kernel_overhead!r} s   # {format_knob('kernel_overhead', c.kernel_overhead)}",
        f"  step_overhead: {c.step_overhead!r} s   # {format_knob('step_overhead', c.step_overhead)}",
        f"  source: {_yaml_str(c.source)}",
        "",
    ]
    return text.rstrip("\n") + "\n" + "\n".join(lines)


def _yaml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _drop_top_level_key(text: str, key: str) -> str:
    """``text`` without the top-level ``key:`` block (and the comment block a previous calibration wrote above it)."""
    out, skipping = [], False
    for line in text.splitlines():
        top = line[:1] not in (" ", "\t", "#", "") and not line.startswith("-")
        if top:
            skipping = line.split(":", 1)[0].strip() == key
            if skipping:
                while out and (out[-1].startswith(("# calibration:", "#   ")) or not out[-1].strip()):
                    out.pop()
        elif skipping and line[:1] == "#":
            skipping = False  # a comment at column 0 ends the block
        if not skipping:
            out.append(line)
    return "\n".join(out) + "\n"


def write_calibrated_chip(fit: CalibrationFit, path: str | Path) -> Path:
    """Write :func:`calibrated_yaml` atomically; the file loads with dse.hardware.load_chip."""

    return output_file(path, calibrated_yaml(fit))  # one line if it cannot be written (issue 21)
