"""dse: a design-space explorer for AI accelerators."""

__version__ = "0.1.0"
