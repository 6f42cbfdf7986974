"""Config plumbing shared by every algorithm: pytree registration, ranges and input validation.

A float field's type says its range, e.g. `gamma: UnitInterval = 0.99`; `pytree_config` checks
every range (and refuses NaN) whenever a Config is built, by the CLI, a sweep or `replace`, so
a Config with `gamma=1.5` cannot exist and bad input fails before anything compiles. Configs
that JAX rebuilds from leaves (tracers under `vmap`) skip the check: their values were checked
when the concrete Config was made.
"""

import dataclasses
import functools
import math
import typing
from collections.abc import Iterable

import jax

from common.ranges import Range


class ConfigError(ValueError):
    """Bad user input, found before anything is compiled; the CLI prints it and exits with 2."""


def pytree_config(cls: type) -> type:
    """Register a frozen Config dataclass as a pytree, and check its float ranges when built.

    Float hyperparameters are leaves, so they can be traced and vmapped (sweeps); ints, bools
    and strings fix shapes and the program, so they live in the treedef.
    """
    hints = typing.get_type_hints(cls)
    extras = typing.get_type_hints(cls, include_extras=True)
    fields = [f.name for f in dataclasses.fields(cls)]
    data = [name for name in fields if hints[name] is float]
    meta = [name for name in fields if hints[name] is not float]
    ranges = {
        name: next(
            (m for m in getattr(extras[name], "__metadata__", ()) if isinstance(m, Range)),
            Range(-math.inf, math.inf, high_open=False),
        )
        for name in data
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
        bad = [
            f"{n} = {getattr(self, n)} (allowed: {r})"
            for n, r in ranges.items()
            if float(getattr(self, n)) not in r
        ]
        if bad:
            raise ConfigError(f"Out of range: {'; '.join(bad)}.")

    cls.__init__ = checked_init
    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls


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
