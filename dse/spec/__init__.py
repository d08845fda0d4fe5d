"""Spec layer: YAML with line numbers -> validated, frozen records."""

from dse.spec.validate import validate
from dse.spec.yamlio import LocDict, LocList, load_yaml, load_yaml_text, locate

__all__ = ["validate", "load_yaml", "load_yaml_text", "locate", "LocDict", "LocList"]
