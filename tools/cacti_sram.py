"""Regenerate ``dse/data/technology/cacti_sram.yaml``: CACTI 7 figures for the SRAM arrays dse prices.

This script is **not part of dse**: nothing in ``dse`` or ``tests`` imports it, CACTI is neither a runtime nor a
test dependency, and it needs no network when it runs. It runs a CACTI binary you built by hand, once, and writes
the figures (area, read / write energy per access, leakage) with the configuration of every run, so that
``tests/model/test_cacti_reference.py`` can check dse's SRAM model against them without CACTI.

Getting CACTI by hand (the only step that needs a package registry)::

    mkdir -p /tmp/cacti && cd /tmp/cacti
    python -m pip download --no-deps --only-binary=:all: --python-version 3.12 hwcomponents-cacti==1.0.40 -d .
    python -m zipfile -e hwcomponents_cacti-1.0.40-py3-none-any.whl wheel
    cd wheel/hwcomponents_cacti/cacti           # CACTI 7.0's C++ sources, its tech_params/ and a prebuilt ./cacti
    chmod +x cacti                              # (zipfile drops the executable bit)
    ./cacti -infile cache.cfg > /dev/null       # the prebuilt binary needs GLIBC_2.38 and GLIBCXX_3.4.32;
                                                # on an older glibc (Debian 12: 2.36) it fails to load. Rebuild:
    rm -rf obj_dbg obj_opt cacti && make opt    # g++ and make (apt-get install g++ make); ~40 s on 2 cores
    ./cacti -infile cache.cfg > /dev/null && echo ok

(``--python-version 3.12`` only because the wheel declares Requires-Python >= 3.12; the wheel is pure data
here: we never import it.) Then, from the repository root::

    python tools/cacti_sram.py --cacti /tmp/cacti/wheel/hwcomponents_cacti/cacti \\
        --wheel /tmp/cacti/hwcomponents_cacti-1.0.40-py3-none-any.whl

It writes ``dse/data/technology/cacti_sram.yaml`` (``--out`` elsewhere; ``--check`` compares the figures with
the shipped file instead of writing). About 100 CACTI runs, 2-3 minutes on 2 cores.

What is run (the run matrix, :func:`runs`):

* configurations (``dse/data/technology/cacti/``): ``hp`` is CACTI 7's own ``cache.cfg`` (ITRS high-performance
  cells and periphery, 360 K, ECC, "normal" access, ED^2), ``lstp`` the same with ITRS low-standby-power cells
  and periphery: the two bracket a real chip's leakage (hwcomponents-cacti's own ``default_cfg.cfg`` is LSTP
  too, but at its deviation bounds CACTI finds no tag organisation for a 16-way cache). Each run appends the
  per-run lines (:func:`run_lines`) the way hwcomponents-cacti does;
* nodes: 45, 32, 22 nm (CACTI's own tables, ``tech_params/*.dat``) and 28 nm, which CACTI interpolates between its
  32 and 22 nm tables (``TechnologyParameter::find_upper_and_lower_tech``); CACTI 7.0 refuses anything under
  22 nm (its 16 nm table is commented out of that function), so N16 and newer are not covered;
* ``main``: a plain scratchpad (``cache type "ram"``, no tags) of 64 KiB to 32 MiB and a 16-way cache with tags
  of 1 to 64 MiB, 64 B per access (a cache line; a local buffer feeding a matrix unit reads at least that),
  one read-write port, one UCA bank;
* ``narrow``: 45 nm scratchpads of 8 KiB, 32 KiB and 1 MiB read 8 B at a time (Horowitz ISSCC 2014's 64-bit
  word, the source of dse's 45 nm anchors);
* ``banked``: 32 MiB scratchpad and cache split into 16 UCA banks (``hp``), CACTI's answer to "a big array is
  banked".

Figures: ``Area (mm2)``, ``Dynamic read energy (nJ)``, ``Dynamic write energy (nJ)``, ``Standby leakage per
bank(mW)`` (x banks: subthreshold + gate leakage), ``Access time (ns)``, ``Random cycle time (ns)`` and the
organisation (Ndwl, Ndbl, Nspd, ...) from the CSV row CACTI appends to ``RUN.cfg.out``; data / tag array areas
and area efficiencies from its report. Derived per MiB / per byte figures divide by the data capacity (ECC
bits, tags and periphery are overhead of the data bytes). Quantities carry units (``dse.units`` parses them).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CFG_DIR = ROOT / "dse" / "data" / "technology" / "cacti"
OUT = ROOT / "dse" / "data" / "technology" / "cacti_sram.yaml"

KiB, MiB = 2**10, 2**20
NODES = (45, 32, 28, 22)  # nm; 28 is interpolated by CACTI between its 32 and 22 nm tables
NATIVE = {45: "tech_params/45nm.dat", 32: "tech_params/32nm.dat", 22: "tech_params/22nm.dat"}
RAM_SIZES = (64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB)
CACHE_SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB, 64 * MiB)
CACHE_WAYS = 16
BLOCK = 64  # bytes per access
CONFIGS = {
    "hp": "CACTI 7.0's own cache.cfg (hwcomponents_cacti/cacti/cache.cfg), the per-run lines removed: ITRS-HP "
          "cells and periphery, 360 K, ECC (1 bit per byte), 'normal' access, ED^2 organisation",
    "lstp": "hp.cfg with ITRS-LSTP (low standby power) cells and periphery in the data and tag arrays; nothing "
            "else differs",
}


@dataclass(frozen=True)
class Run:
    set: str            # main | narrow | banked
    kind: str           # ram | cache
    config: str         # hp | lstp
    node: int           # nm
    size: int           # data bytes
    block: int = BLOCK  # bytes per access
    banks: int = 1

    @property
    def ways(self) -> int:
        return CACHE_WAYS if self.kind == "cache" else 1

    @property
    def id(self) -> str:
        tail = "" if self.set == "main" else f"-{self.set}"
        return f"{self.kind}-{self.config}-{self.node}nm-{_size(self.size)}-{self.block}B{tail}"


def runs() -> list[Run]:
    out = []
    for config in CONFIGS:
        for node in NODES:
            out += [Run("main", "ram", config, node, s) for s in RAM_SIZES]
            out += [Run("main", "cache", config, node, s) for s in CACHE_SIZES]
        out += [Run("narrow", "ram", config, 45, s, block=8) for s in (8 * KiB, 32 * KiB, 1 * MiB)]
    for node in NODES:
        out += [Run("banked", kind, "hp", node, 32 * MiB, banks=16) for kind in ("ram", "cache")]
    return out


def run_lines(r: Run) -> str:
    """The per-run lines appended to the base configuration (the keys and order of hwcomponents-cacti)."""
    return (f"-size (bytes) {r.size}\n"
            f"-read-write port 1\n"
            f"-block size (bytes) {r.block}\n"
            f"-technology (u) {r.node / 1000:.3f}\n"
            f"-output/input bus width {r.block * 8}\n"
            f"-UCA bank count {r.banks}\n"
            f"-cache type \"{r.kind}\"\n"
            f"-tag size (b) \"default\"\n"
            f"-associativity {r.ways}\n")


def config_text(r: Run) -> str:
    base = (CFG_DIR / f"{r.config}.cfg").read_text()
    return base.rstrip("\n") + "\n\n# ---- per-run lines (tools/cacti_sram.py)\n" + run_lines(r)


def _size(n: int) -> str:
    return f"{n // MiB}MiB" if n % MiB == 0 else f"{n // KiB}KiB"


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _num(text: str, pattern: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def cell_area_f2(cacti: Path, node: int) -> float:
    """SRAM cell area in F^2 from CACTI's tables (the hp column of ``-area_cell`` in the SRAM block)."""
    files = [NATIVE[node]] if node in NATIVE else [NATIVE[32], NATIVE[22]]
    vals = []
    for f in files:
        for line in (cacti / f).read_text().splitlines():
            if line.startswith("-area_cell") and line.split()[2] == "0":  # cell_type 0 = SRAM
                vals.append(float(line.split()[3]))
                break
    if len(set(vals)) != 1:
        raise SystemExit(f"SRAM cell area differs between {files}: {vals}")
    return vals[0]


def run_cacti(cacti: Path, r: Run) -> dict:
    text = config_text(r)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / f"{r.id}.cfg"
        cfg.write_text(text)
        proc = subprocess.run(["./cacti", "-infile", str(cfg)], cwd=cacti, capture_output=True, text=True,
                              timeout=1800)
        report = proc.stdout + proc.stderr
        csv_path = Path(str(cfg) + ".out")
        if proc.returncode != 0 or not csv_path.exists():
            raise SystemExit(f"CACTI failed on {r.id} (exit {proc.returncode}):\n{report[-3000:]}")
        rows = list(csv.DictReader(csv_path.read_text().splitlines(), skipinitialspace=True))
    row = {k.strip(): v.strip() for k, v in rows[-1].items() if k}
    if int(float(row["Capacity (bytes)"])) != r.size or int(float(row["Tech node (nm)"])) != r.node:
        raise SystemExit(f"{r.id}: CACTI answered for another array: {row}")
    data_area = _num(report, r"Data array: Area \(mm2\): ([0-9.eE+-]+)")
    tag_area = _num(report, r"Tag array: Area \(mm2\): ([0-9.eE+-]+)")

    def eff(key):
        v = row.get(key, "N/A")
        return None if v in ("N/A", "") else float(v) / 100.0

    org = {k: int(float(row[k])) for k in ("Ndwl", "Ndbl", "Nspd", "Ndcm", "Ndsam_level_1", "Ndsam_level_2")}
    if r.kind == "cache":
        org.update({k: int(float(row[k])) for k in ("Ntwl", "Ntbl", "Ntspd", "Ntcm", "Ntsam_level_1",
                                                       "Ntsam_level_2")})
    return {
        "cfg_sha256": _sha(text),
        "area_mm2": float(row["Area (mm2)"]),
        "data_area_mm2": data_area,
        "tag_area_mm2": tag_area,
        "data_efficiency": eff("Data arrary area efficiency %"),
        "tag_efficiency": eff("Tag arrary area efficiency %"),
        "read_nJ": float(row["Dynamic read energy (nJ)"]),
        "write_nJ": float(row["Dynamic write energy (nJ)"]),
        "leakage_mW": float(row["Standby leakage per bank(mW)"]) * r.banks,
        "access_ns": float(row["Access time (ns)"]),
        "cycle_ns": float(row["Random cycle time (ns)"]),
        "organisation": org,
    }


def _g(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def _entry(r: Run, f: dict, cell_f2: float) -> str:
    mib = r.size / MiB
    cell_um2 = cell_f2 * (r.node / 1000.0) ** 2
    parts = [
        f"id: {r.id}", f"set: {r.set}", f"kind: {r.kind}", f"config: {r.config}", f"node: {r.node} nm",
        f"interpolated: {'true' if r.node not in NATIVE else 'false'}",
        f"size: {_size(r.size).replace('MiB', ' MiB').replace('KiB', ' KiB')}", f"access: {r.block} B",
        f"associativity: {r.ways}", f"banks: {r.banks}", "ports: 1",
        f"area: {_g(f['area_mm2'])} mm^2",
        f"data_area: {_g(f['data_area_mm2'])} mm^2" if f["data_area_mm2"] is not None else "data_area: null",
        f"tag_area: {_g(f['tag_area_mm2'])} mm^2" if f["tag_area_mm2"] is not None else "tag_area: null",
        f"data_efficiency: {_g(f['data_efficiency'])}" if f["data_efficiency"] is not None else "data_efficiency: null",
        f"tag_efficiency: {_g(f['tag_efficiency'])}" if f["tag_efficiency"] is not None else "tag_efficiency: null",
        f"bitcell: {_g(cell_um2)} um^2",
        f"read_energy: {_g(f['read_nJ'] * 1e3)} pJ", f"write_energy: {_g(f['write_nJ'] * 1e3)} pJ",
        f"leakage: {_g(f['leakage_mW'])} mW",
        f"access_time: {_g(f['access_ns'])} ns", f"cycle_time: {_g(f['cycle_ns'])} ns",
        f"area_per_MiB: {_g(f['area_mm2'] / mib)} mm^2/MiB",
        f"read_per_byte: {_g(f['read_nJ'] * 1e3 / r.block)} pJ/B",
        f"write_per_byte: {_g(f['write_nJ'] * 1e3 / r.block)} pJ/B",
        "organisation: {" + ", ".join(f"{k}: {v}" for k, v in f["organisation"].items()) + "}",
        f"cfg_sha256: {f['cfg_sha256']}",
    ]
    return "  - {" + ", ".join(parts) + "}\n"


HEADER = """\
# CACTI 7.0 figures for the SRAM arrays dse prices (scratchpads / local buffers and caches), the reference that
# tests/model/test_cacti_reference.py checks dse's SRAM area, energy and leakage against (docs/technology.md,
# "SRAM against CACTI"). Written by tools/cacti_sram.py (do not edit by hand; how to install or rebuild CACTI is
# in that script's docstring). CACTI is not a dependency of dse or its tests: these numbers are its output, kept.
#
# Each run: the base configuration `config` (configs: below, files under cacti/) plus the per-run lines of
# tools/cacti_sram.py run_lines() (size, access width = block size and bus width, associativity, UCA banks,
# technology, cache type, tag size "default"); cfg_sha256 is the SHA-256 of the exact text CACTI read.
# Raw figures as CACTI reports them: area (mm^2, the whole array: data + tag arrays, periphery, H-trees),
# data/tag array areas and area efficiencies (cell area / array area), read and write energy per access (the
# `access` bytes; a cache read includes its tag array), leakage (standby: subthreshold + gate, all banks),
# access and random cycle time, the organisation CACTI chose (Ndwl, Ndbl, ...). `bitcell` is CACTI's SRAM cell
# (tech_params: 146 F^2 at every node). Derived: area_per_MiB = area / data MiB, read/write_per_byte = energy
# per access / access bytes (ECC bits, tags and periphery are overhead of the data bytes; leakage per MiB is
# leakage / size). 28 nm is CACTI's own interpolation between its 32 and 22 nm tables.
"""


def _toolchain() -> str:
    """The compiler and C library this machine builds CACTI with, e.g. "g++ 12.2.0, glibc 2.36"."""
    import platform
    try:
        gxx = subprocess.run(["g++", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gxx = "?"
    lib, ver = platform.libc_ver()
    return f"g++ {gxx or '?'}, {lib or 'libc'} {ver or '?'}"


def write_yaml(cacti: Path, wheel: Path | None, figures: dict[str, dict], out: Path) -> None:
    version = (cacti / "version_cacti.h").read_text()
    major = re.search(r"VER_MAJOR_CACTI\s+(\d+)", version).group(1)
    minor = re.search(r"VER_MINOR_CACTI\s+(\d+)", version).group(1)
    comment = re.search(r'VER_COMMENT_CACTI\s+"([^"]*)"', version).group(1)
    text = [HEADER, "cacti:\n",
            f"  version: \"CACTI {major}.{minor} ({comment}; version_cacti.h of the sources in the wheel)\"\n",
            "  package: \"hwcomponents-cacti 1.0.40 (PyPI wheel hwcomponents_cacti-1.0.40-py3-none-any.whl)\"\n"]
    if wheel is not None:
        text.append(f"  wheel_sha256: {_sha(wheel.read_bytes())}\n")
    text += [f"  binary: \"rebuilt from the wheel's C++ sources (make opt, {_toolchain()}): the prebuilt ./cacti "
             "needs GLIBC_2.38\"\n",
             "  how: \"cd hwcomponents_cacti/cacti; ./cacti -infile RUN.cfg; figures from the CSV row it appends to "
             "RUN.cfg.out and from its report (tools/cacti_sram.py)\"\n",
             "  nodes: {45: tech_params/45nm.dat, 32: tech_params/32nm.dat, 28: \"interpolated by CACTI between "
             "32nm.dat and 22nm.dat\", 22: tech_params/22nm.dat}\n",
             "  not_covered: \"below 22 nm: CACTI 7.0's find_upper_and_lower_tech has its 16 nm table commented out "
             "('Invalid technology nodes')\"\n",
             "configs:\n"]
    for name, what in CONFIGS.items():
        text.append(f"  {name}: {{file: cacti/{name}.cfg, sha256: {_sha((CFG_DIR / f'{name}.cfg').read_text())}, "
                    f"what: \"{what}\"}}\n")
    text.append("runs:\n")
    cells = {n: cell_area_f2(cacti, n) for n in NODES}
    for r in runs():
        text.append(_entry(r, figures[r.id], cells[r.node]))
    out.write_text("".join(text))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cacti", type=Path, required=True,
                    help="folder with the (rebuilt) ./cacti binary and its tech_params/ (hwcomponents_cacti/cacti)")
    ap.add_argument("--wheel", type=Path, help="the hwcomponents-cacti wheel, to record its SHA-256")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with the shipped yaml instead of writing")
    ap.add_argument("--only", help="run only the runs whose id contains this text (prints, writes nothing)")
    args = ap.parse_args(argv)
    cacti = args.cacti.resolve()
    if not os.access(cacti / "cacti", os.X_OK):
        raise SystemExit(f"no executable {cacti / 'cacti'}: build it first (see this script's docstring)")
    todo = runs() if not args.only else [r for r in runs() if args.only in r.id]
    figures = {}
    for i, r in enumerate(todo, 1):
        figures[r.id] = run_cacti(cacti, r)
        f = figures[r.id]
        print(f"[{i}/{len(todo)}] {r.id}: {f['area_mm2']:.4g} mm^2, read {f['read_nJ'] * 1e3:.4g} pJ, "
              f"leakage {f['leakage_mW']:.4g} mW", file=sys.stderr)
    if args.only:
        return 0
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "cacti_sram.yaml"
            write_yaml(cacti, args.wheel, figures, fresh)
            same = [ln for ln in fresh.read_text().splitlines() if "wheel_sha256" not in ln] == \
                   [ln for ln in args.out.read_text().splitlines() if "wheel_sha256" not in ln]
        print("same figures as " + str(args.out) if same else "DIFFERENT from " + str(args.out))
        return 0 if same else 1
    write_yaml(cacti, args.wheel, figures, args.out)
    print(f"wrote {args.out} ({len(todo)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
