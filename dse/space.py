"""Design spaces: named parameters and their grids, samples and Optuna domains.

A :class:`DesignSpace` is an ordered tuple of parameter records. Parameter
names are the chip's dotted names (``'hbm.stacks'``, ``'clock'``); here they
are just strings. Every batch of design points is a ``dict[str, np.ndarray]``
with one array per parameter and one row per point: the struct of arrays the
evaluator takes.

- :class:`IntParam` ``low, low + step, ..., <= high``.
- :class:`FloatParam` uniform on ``[low, high]``.
- :class:`LogParam` log-uniform on ``[low, high]`` (``integer=True``: integers).
- :class:`ChoiceParam` one of a fixed tuple of values (numbers or strings).

Records are frozen and checked when built: a wrong bound raises
:class:`~dse.errors.SpecError` naming the parameter.
"""

from __future__ import annotations

import abc

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError, unknown_name

__all__ = [
    "Param",
    "IntParam",
    "FloatParam",
    "LogParam",
    "ChoiceParam",
    "DesignSpace",
    "DEFAULT_RESOLUTION",
    "DEFAULT_CHUNK",
]

#: Grid points per continuous parameter when none is given.
DEFAULT_RESOLUTION = 11
#: Design points per chunk of :meth:`DesignSpace.iter_grid`.
DEFAULT_CHUNK = 65_536


def _number(param: str, what: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SpecError(f"parameter '{param}': {what} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SpecError(f"parameter '{param}': {what} must be finite, got {value!r}")
    return value


def _integer(param: str, what: str, value) -> int:
    _number(param, what, value)
    if int(value) != value:
        raise SpecError(f"parameter '{param}': {what} must be an integer, got {value!r}")
    return int(value)


def _check_resolution(resolution) -> int:
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)) or resolution < 1:
        raise SpecError(f"grid resolution: must be an integer >= 1, got {resolution!r}")
    return int(resolution)


@dataclass(frozen=True)
class Param(abc.ABC):
    """Base of the parameter records: a name and the methods every kind provides.

    ``size`` is the number of distinct values (``math.inf`` for continuous
    parameters); ``grid_values(resolution)`` the values a grid visits;
    ``sample(rng, n)`` n values drawn uniformly (in the parameter's own
    measure); ``to_optuna_distribution()`` the matching Optuna distribution.
    """

    name: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError(f"parameter name: must be a non-empty string, got {self.name!r}")

    @property
    @abc.abstractmethod
    def size(self) -> int | float:
        """Number of distinct values (math.inf when continuous)."""

    @property
    def is_discrete(self) -> bool:
        return self.size != math.inf

    @abc.abstractmethod
    def grid_values(self, resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
        """The values a grid visits."""

    @abc.abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n values drawn uniformly in the parameter's own measure."""

    @abc.abstractmethod
    def to_optuna_distribution(self):
        """The matching Optuna distribution."""


#: the largest magnitude of an integer parameter's bounds and step: its values low + i x step and its range
#: high - low are computed as int64 (numpy's; a step of 2^63 overflowed the search's Latin hypercube)
INT_PARAM_BOUND = 2 ** 62


@dataclass(frozen=True)
class IntParam(Param):
    """Integers ``low, low + step, ...`` up to ``high``.

    If ``high - low`` is not a multiple of ``step`` the last value is the
    largest one below ``high`` (what Optuna's IntDistribution does).
    """

    low: int
    high: int
    step: int = 1

    def __post_init__(self):
        super().__post_init__()
        low = _integer(self.name, "low", self.low)
        high = _integer(self.name, "high", self.high)
        step = _integer(self.name, "step", self.step)
        if low > high:
            raise SpecError(f"parameter '{self.name}': low ({low}) must be <= high ({high})")
        if step < 1:
            raise SpecError(f"parameter '{self.name}': step must be >= 1, got {step}")
        if max(abs(low), abs(high), step) > INT_PARAM_BOUND:  # (a search computes its values as int64: low + i step)
            raise SpecError(f"parameter '{self.name}': low, high and step must lie within +-2^62, got low {low}, "
                            f"high {high}, step {step}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "step", step)

    @property
    def top(self) -> int:
        """The largest value actually reachable (``high`` rounded down to the step)."""
        return self.low + (self.high - self.low) // self.step * self.step

    @property
    def size(self) -> int:
        return (self.high - self.low) // self.step + 1

    def grid_values(self, resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
        """Every value: the grid of an integer parameter ignores ``resolution``."""
        return np.arange(self.low, self.top + 1, self.step, dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.low + rng.integers(0, self.size, size=n, dtype=np.int64) * self.step

    def to_optuna_distribution(self):
        from optuna.distributions import IntDistribution

        return IntDistribution(self.low, self.top, step=self.step)


@dataclass(frozen=True)
class FloatParam(Param):
    """Reals, uniform on ``[low, high]``; the grid has ``resolution`` evenly spaced points."""

    low: float
    high: float

    def __post_init__(self):
        super().__post_init__()
        low = float(_number(self.name, "low", self.low))
        high = float(_number(self.name, "high", self.high))
        if low > high:
            raise SpecError(f"parameter '{self.name}': low ({low:g}) must be <= high ({high:g})")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def size(self) -> int | float:
        return 1 if self.low == self.high else math.inf

    def grid_values(self, resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
        if self.low == self.high:
            return np.array([self.low])
        return np.linspace(self.low, self.high, _check_resolution(resolution))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=n)

    def to_optuna_distribution(self):
        from optuna.distributions import FloatDistribution

        return FloatDistribution(self.low, self.high)


@dataclass(frozen=True)
class LogParam(Param):
    """Log-uniform on ``[low, high]``, ``0 < low``; ``integer=True`` for integers.

    The grid has ``resolution`` geometrically spaced points (integers: rounded,
    duplicates dropped). Integer samples are drawn log-uniformly on
    ``[low - 0.5, high + 0.5]`` and rounded, as Optuna does.
    """

    low: float
    high: float
    integer: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.integer:
            low = _integer(self.name, "low", self.low)
            high = _integer(self.name, "high", self.high)
        else:
            low = float(_number(self.name, "low", self.low))
            high = float(_number(self.name, "high", self.high))
        if low <= 0:
            raise SpecError(f"parameter '{self.name}': low must be > 0 for a log scale, got {low:g}")
        if low > high:
            raise SpecError(f"parameter '{self.name}': low ({low:g}) must be <= high ({high:g})")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "integer", bool(self.integer))

    @property
    def size(self) -> int | float:
        if self.integer:
            return int(self.high - self.low + 1)
        return 1 if self.low == self.high else math.inf

    def grid_values(self, resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
        if self.low == self.high:
            return np.array([self.low], dtype=np.int64 if self.integer else float)
        values = np.geomspace(self.low, self.high, _check_resolution(resolution))
        if self.integer:
            return np.unique(np.rint(values).astype(np.int64))
        return values

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.integer:
            u = rng.uniform(math.log(self.low - 0.5), math.log(self.high + 0.5), size=n)
            return np.clip(np.rint(np.exp(u)), self.low, self.high).astype(np.int64)
        return np.clip(np.exp(rng.uniform(math.log(self.low), math.log(self.high), size=n)), self.low, self.high)

    def to_optuna_distribution(self):
        from optuna.distributions import FloatDistribution, IntDistribution

        if self.integer:
            return IntDistribution(int(self.low), int(self.high), log=True)
        return FloatDistribution(self.low, self.high, log=True)


@dataclass(frozen=True)
class ChoiceParam(Param):
    """One of ``choices`` (numbers or strings, distinct, at least one)."""

    choices: tuple

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.choices, (str, bytes)) or not isinstance(self.choices, Sequence):
            raise SpecError(f"parameter '{self.name}': choices must be a list, got {self.choices!r}")
        choices = tuple(self.choices)
        if not choices:
            raise SpecError(f"parameter '{self.name}': choices must not be empty")
        for c in choices:
            if not isinstance(c, (bool, int, float, str, np.integer, np.floating)):
                raise SpecError(f"parameter '{self.name}': a choice must be a number or a string, got {c!r}")
        if len(set(choices)) != len(choices):
            dup = sorted({repr(c) for c in choices if choices.count(c) > 1})
            raise SpecError(f"parameter '{self.name}': choices must be distinct; repeated: {', '.join(dup)}")
        object.__setattr__(self, "choices", choices)

    @property
    def size(self) -> int:
        return len(self.choices)

    def values(self) -> np.ndarray:
        """The choices as one array: numeric if all are numbers, str if all strings, else object."""
        if all(isinstance(c, str) for c in self.choices):
            return np.array(self.choices, dtype=str)
        if all(isinstance(c, (bool, np.bool_)) for c in self.choices):
            return np.array(self.choices, dtype=bool)
        if all(isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool) for c in self.choices):
            return np.array(self.choices)
        out = np.empty(len(self.choices), dtype=object)
        out[:] = list(self.choices)
        return out

    def grid_values(self, resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
        """Every choice, in the order given (``resolution`` is ignored)."""
        return self.values()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.values()[rng.integers(0, self.size, size=n)]

    def to_optuna_distribution(self):
        from optuna.distributions import CategoricalDistribution

        plain = [c.item() if isinstance(c, np.generic) else c for c in self.choices]
        return CategoricalDistribution(plain)


@dataclass(frozen=True)
class DesignSpace:
    """An ordered, non-empty tuple of parameters with distinct names.

    Grids are the cartesian product of each parameter's ``grid_values``; the
    last parameter varies fastest (as ``itertools.product``). Point ``i`` of
    the grid is found by mixed-radix index arithmetic, so the product is never
    held in memory.
    """

    params: tuple[Param, ...]

    def __post_init__(self):
        if isinstance(self.params, Param):
            raise SpecError("design space: expected a list of parameters, got a single parameter")
        params = tuple(self.params)
        if not params:
            raise SpecError("design space: it has no parameters; give at least one")
        for p in params:
            if not isinstance(p, Param):
                raise SpecError(f"design space: expected parameter records, got {p!r}")
        seen: set[str] = set()
        for p in params:
            if p.name in seen:
                raise SpecError(f"design space: parameter '{p.name}' is given twice")
            seen.add(p.name)
        object.__setattr__(self, "params", params)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def __len__(self) -> int:
        return len(self.params)

    def __iter__(self) -> Iterator[Param]:
        return iter(self.params)

    def __getitem__(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise SpecError(unknown_name("parameter", name, self.names))

    @property
    def is_discrete(self) -> bool:
        """True when every parameter has finitely many values (the grid is the whole space)."""
        return all(p.is_discrete for p in self.params)

    def grid_axes(self, resolution: int = DEFAULT_RESOLUTION) -> list[np.ndarray]:
        """Each parameter's grid values, in order."""
        return [p.grid_values(resolution) for p in self.params]

    def grid_size(self, resolution: int = DEFAULT_RESOLUTION) -> int:
        """Number of grid points (an exact Python int; it can be astronomically large)."""
        return math.prod(len(v) for v in self.grid_axes(resolution))

    def grid_points(self, index, resolution: int = DEFAULT_RESOLUTION) -> dict[str, np.ndarray]:
        """The grid points with the given flat indices (0 <= index < grid_size)."""
        axes = self.grid_axes(resolution)
        idx = np.asarray(index, dtype=np.int64).copy()
        total = math.prod(len(v) for v in axes)
        if idx.size and (idx.min() < 0 or idx.max() >= total):
            raise SpecError(f"grid index: must be in [0, {total}), got {idx.min()}..{idx.max()}")
        return self._decode(idx, axes)

    def _decode(self, idx: np.ndarray, axes: list[np.ndarray]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for p, values in zip(reversed(self.params), reversed(axes)):
            idx, digit = np.divmod(idx, len(values))
            out[p.name] = values[digit]
        return {name: out[name] for name in self.names}

    def iter_grid(self, chunk: int = DEFAULT_CHUNK, resolution: int = DEFAULT_RESOLUTION) -> Iterator[dict[str, np.ndarray]]:
        """Yield the grid in order, ``chunk`` points at a time (the last chunk may be shorter)."""
        if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
            raise SpecError(f"grid chunk: must be an integer >= 1, got {chunk!r}")
        axes = self.grid_axes(resolution)
        total = math.prod(len(v) for v in axes)
        if total >= 2**63:
            raise SpecError(f"design space: the grid has {total:.3e} points, too many to enumerate")
        for start in range(0, total, int(chunk)):
            stop = min(total, start + int(chunk))
            yield self._decode(np.arange(start, stop, dtype=np.int64), axes)

    def sample(self, n: int, seed: int | np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """``n`` points drawn uniformly and independently per parameter.

        ``seed`` is an int (same seed, same points) or a numpy Generator, which
        is advanced (successive calls give successive batches of one stream).
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise SpecError(f"sample size: must be an integer >= 0, got {n!r}")
        rng = np.random.default_rng(seed)
        return {p.name: p.sample(rng, int(n)) for p in self.params}

    def to_optuna_distributions(self) -> dict:
        """``{name: optuna distribution}`` for every parameter."""
        return {p.name: p.to_optuna_distribution() for p in self.params}
