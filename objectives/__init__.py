"""Objective catalog: one module per objective, discovered by name (dse.registry).

Each module exposes ``objective(metrics, **params) -> np.ndarray`` over the
metrics table (a mapping column -> array, e.g. a pandas DataFrame), plus NAME,
UNIT, DIRECTION ('minimize' | 'maximize'), FORMULA, SOURCE and PARAMS
(name -> (dimension, default); default None means required).
"""
