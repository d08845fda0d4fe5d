"""The chip catalog (dse/data/chips): names, aliases, loading chips and chip files."""

from __future__ import annotations

import functools
from pathlib import Path

from dse.errors import SpecError, unknown_name
from dse.hardware.records import ChipSpec
from dse.spec import load_yaml, validate

DATA = Path(__file__).resolve().parents[1] / "data"
CHIP_DIR = DATA / "chips"


def catalog_names() -> list[str]:
    return sorted(p.stem for p in CHIP_DIR.glob("*.yaml"))


_ALIASES = {
    "h100": "h100-sxm", "h200": "h200-sxm", "b200": "b200", "a100": "a100-sxm-80gb", "v100": "v100-sxm2",
    "rtx-pro-6000-blackwell": "rtx-pro-6000", "m1-ultra": "apple-m1-ultra", "m3-ultra": "apple-m3-ultra",
    "m4-max": "apple-m4-max", "m2-max": "apple-m2-max", "groq": "groq-tsp", "wse-3": "cerebras-wse-3", "tpu-v1": "tpu-v1",
}


def resolve_name(name: str) -> Path:
    names = catalog_names()
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key in names:
        return CHIP_DIR / f"{key}.yaml"
    raise SpecError(unknown_name("chip", name, names))


def _exists(p: Path) -> bool:
    """Path.exists that says no to a name the OS cannot even look up (too long, NUL byte)."""
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def load_chip_dict(name_or_path: str | Path):
    """The raw (located) YAML of a catalog chip or a chip file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or _exists(p):
        return load_yaml(p)
    return load_yaml(resolve_name(str(name_or_path)))


@functools.lru_cache(maxsize=256)
def _load_catalog_chip(path: str) -> ChipSpec:
    return validate(ChipSpec, load_yaml(path))


def load_chip(name_or_path: str | Path) -> ChipSpec:
    """A validated chip from the catalog (by name) or from a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or _exists(p):
        return validate(ChipSpec, load_yaml(p))
    return _load_catalog_chip(str(resolve_name(str(name_or_path))))


def chip_from_dict(data: dict) -> ChipSpec:
    return validate(ChipSpec, data)


def catalog() -> list[ChipSpec]:
    return [load_chip(n) for n in catalog_names()]
