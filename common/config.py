"""Config plumbing shared by every algorithm: pytree registration and input validation."""

import dataclasses
import typing
from collections.abc import Iterable

import jax


class ConfigError(ValueError):
    """Bad user input, found before anything is compiled; the CLI prints it and exits with 2."""


def pytree_config(cls: type) -> type:
    """Register a frozen Config dataclass as a pytree: float fields are leaves, the rest static.

    Float hyperparameters can then be traced and vmapped (sweeps); ints, bools and strings fix
    shapes and the program, so they live in the treedef.
    """
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    data = [name for name in fields if hints[name] is float]
    meta = [name for name in fields if hints[name] is not float]

    def flatten(config: typing.Any) -> tuple:
        children = [(jax.tree_util.GetAttrKey(n), getattr(config, n)) for n in data]
        return children, tuple(getattr(config, n) for n in meta)

    def unflatten(static: tuple, leaves: Iterable) -> typing.Any:
        # Bypass __init__: JAX rebuilds configs with tracers, arrays or placeholders as leaves,
        # which a runtime type check of `float` fields would reject.
        config = object.__new__(cls)
        for name, value in [*zip(data, leaves, strict=True), *zip(meta, static, strict=True)]:
            object.__setattr__(config, name, value)
        return config

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
