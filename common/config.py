"""Config plumbing shared by every algorithm: pytree registration, ranges and input validation.

A field's type says its range (`gamma: UnitInterval = 0.99`, `num_envs: PositiveInt = 4`);
`pytree_config` checks every range (and refuses NaN) whenever a Config is built, by the CLI,
a sweep or `replace`, so a Config with `gamma=1.5` cannot exist and bad input fails before
anything compiles. Configs that JAX rebuilds from leaves (tracers under `vmap`) skip the
check: their values were checked when the concrete Config was made.
"""

import contextlib
import contextvars
import dataclasses
import functools
import math
import typing
from collections.abc import Iterable, Iterator
from typing import Annotated

import jax


class ConfigError(ValueError):
    """Bad user input, found before anything is compiled; the CLI prints it and exits with 2."""


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of allowed values for a float or int field; NaN is never in it."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = True

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{left}{self.low:g}, {self.high:g}{right}"


Positive = Annotated[float, Range(0.0, low_open=True)]  # (0, inf): finite, above zero
PositiveOrInf = Annotated[float, Range(0.0, low_open=True, high_open=False)]  # inf: "no limit"
NonNegative = Annotated[float, Range(0.0)]
Finite = Annotated[float, Range(-math.inf, low_open=True)]  # any finite value
UnitInterval = Annotated[float, Range(0.0, 1.0, high_open=False)]
PositiveFraction = Annotated[float, Range(0.0, 1.0, low_open=True, high_open=False)]
PositiveInt = Annotated[int, Range(1.0)]  # sizes and counts: 1, 2, ...
NonNegativeInt = Annotated[int, Range(0.0)]


_DEFERRED = contextvars.ContextVar("canter_config_checks_deferred", default=False)


@contextlib.contextmanager
def deferred_checks() -> Iterator[None]:
    """Configs built inside skip their range checks: the command line parses flags with tyro,
    which would print a ConfigError raised mid-parse in its own multi-line box; the CLI checks
    the parsed Config afterwards (`checked`), so the error is one `error:` line like the rest."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def checked(config: typing.Any) -> typing.Any:
    """`config` rebuilt with its checks (a ConfigError if a value is out of its range)."""
    return dataclasses.replace(config)


def pytree_config(cls: type) -> type:
    """Register a frozen Config dataclass as a pytree, and check its float ranges (and its
    fields of a few choices) when built.

    Float hyperparameters are leaves, so they can be traced and vmapped (sweeps); ints, bools
    and strings fix shapes and the program, so they live in the treedef.
    """
    hints = typing.get_type_hints(cls)
    extras = typing.get_type_hints(cls, include_extras=True)
    fields = [f.name for f in dataclasses.fields(cls)]
    data = [name for name in fields if hints[name] is float]
    meta = [name for name in fields if hints[name] is not float]
    unbounded = Range(-math.inf, math.inf, high_open=False)
    declared = {
        name: next(
            (m for m in getattr(extras[name], "__metadata__", ()) if isinstance(m, Range)), None
        )
        for name in fields
    }
    # Every float field is checked (NaN is in no range); an int field where its type says so.
    ranges = {
        name: declared[name] or unbounded
        for name in fields
        if name in data or declared[name] is not None
    }
    # A string field of a few choices (`typing.Literal`) is checked too: tyro checks the CLI's.
    choices = {
        name: typing.get_args(hints[name])
        for name in fields
        if typing.get_origin(hints[name]) is typing.Literal
    }

    def flatten(config: typing.Any) -> tuple:
        children = [(jax.tree_util.GetAttrKey(n), getattr(config, n)) for n in data]
        return children, tuple(getattr(config, n) for n in meta)

    def unflatten(static: tuple, leaves: Iterable) -> typing.Any:
        # Bypass __init__: JAX rebuilds configs with tracers, arrays or placeholders as leaves.
        config = object.__new__(cls)
        for name, value in [*zip(data, leaves, strict=True), *zip(meta, static, strict=True)]:
            object.__setattr__(config, name, value)
        return config

    init = cls.__init__

    @functools.wraps(init)
    def checked_init(self: typing.Any, *args: typing.Any, **kwargs: typing.Any) -> None:
        init(self, *args, **kwargs)
        if _DEFERRED.get():
            return
        bad = [
            f"{n} = {getattr(self, n)} (allowed: {r})"
            for n, r in ranges.items()
            if float(getattr(self, n)) not in r
        ]
        if bad:
            raise ConfigError(f"Out of range: {'; '.join(bad)}.")
        bad = [
            f"{n} = {getattr(self, n)!r} (choose one of {', '.join(map(repr, c))})"
            for n, c in choices.items()
            if getattr(self, n) not in c
        ]
        if bad:
            raise ConfigError(f"Not one of the choices: {'; '.join(bad)}.")

    cls.__init__ = checked_init
    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls


def traced_fields(config: typing.Any) -> list[str]:
    """The fields of a `pytree_config` Config that are leaves: tracers under the runner."""
    paths = jax.tree_util.tree_flatten_with_path(config)[0]
    return [path[0].name for path, _ in paths]


def check_positive(config: typing.Any, *names: str) -> None:
    """Fail clearly when any named size or coefficient is zero or negative."""
    bad = [f"{name}={getattr(config, name)}" for name in names if not getattr(config, name) > 0]
    if bad:
        raise ConfigError(f"These settings must be positive: {', '.join(bad)}.")


def check_divides(config: typing.Any, numerator: str, value: int, denominator: str) -> None:
    """Fail clearly when `value` (described by `numerator`) is not a multiple of a field."""
    divisor = getattr(config, denominator)
    if value % divisor:
        raise ConfigError(
            f"{numerator} = {value} is not divisible by {denominator} = {divisor}; "
            f"choose sizes where {denominator} divides {numerator} exactly."
        )


def check_budget(config: typing.Any, env_steps_per_iteration: int) -> None:
    """Fail clearly when `total_timesteps` does not cover a single iteration."""
    if config.total_timesteps < env_steps_per_iteration:
        raise ConfigError(
            f"total_timesteps = {config.total_timesteps} is smaller than one iteration "
            f"({env_steps_per_iteration} env steps)."
        )


def check_replay(config: typing.Any) -> None:
    """Fail clearly on replay sizes that do not fit: `train_frequency` against `num_envs`
    (one divides the other), and a buffer smaller than one vector step."""
    if config.num_envs % config.train_frequency and config.train_frequency % config.num_envs:
        raise ConfigError(
            f"train_frequency = {config.train_frequency} must divide num_envs = "
            f"{config.num_envs} or be a multiple of it."
        )
    if config.buffer_size < config.num_envs:
        raise ConfigError(
            f"buffer_size = {config.buffer_size} is smaller than num_envs = {config.num_envs}."
        )
