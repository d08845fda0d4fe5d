"""Constraint catalog: one module per constraint, discovered by name (dse.registry).

Each module exposes ``constraint(metrics, **params) -> np.ndarray`` over the
metrics table (a mapping column -> array, e.g. a pandas DataFrame), with
Optuna's convention: a value ``<= 0`` is feasible and a positive value is the
violation in the constraint's own unit (UNIT). Module attributes: NAME, UNIT,
FORMULA, SOURCE and PARAMS (name -> (dimension, default); default None means
required, ``dse.registry.AUTO`` means computed by the function when absent).
"""
