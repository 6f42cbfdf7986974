"""The batch axis of a run: sweep points x seeds, point-major, one entry per trained agent.

Every point sees the same seeds; float fields (the dynamic ones) become arrays along the axis,
so the whole grid is one compiled program. Static fields must be the same for every entry.
"""

import dataclasses
import itertools
import typing
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from jaxtyping import Array, Key


def seed_keys(seed: int, num_seeds: int) -> Key[Array, " num_seeds"]:
    """Keys for seeds `seed ... seed + num_seeds - 1`: seed i of a vmapped run is `key(seed+i)`."""
    return jax.vmap(jax.random.key)(jnp.arange(seed, seed + num_seeds))


def float_fields(config_cls: type) -> list[str]:
    """The dynamic (traced, sweepable) fields of a Config: those annotated `float`."""
    hints = typing.get_type_hints(config_cls)
    return [f.name for f in dataclasses.fields(config_cls) if hints[f.name] is float]


def parse_sweep(specs: Sequence[str], config_cls: type) -> dict[str, list[float]]:
    """`["learning_rate=1e-4,3e-4", "ent_coef=0,0.01"]` -> {name: values}; only float fields."""
    dynamic = float_fields(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    sweep: dict[str, list[float]] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name not in names:
            raise ConfigError(
                f"--sweep {spec}: no field '{name}'. Sweepable: {', '.join(dynamic)}."
            )
        if name not in dynamic:
            raise ConfigError(
                f"--sweep {spec}: '{name}' is static (it fixes shapes or the program), so it "
                f"cannot share one compiled program; run it separately. Sweepable (float) "
                f"fields: {', '.join(dynamic)}."
            )
        if name in sweep:
            raise ConfigError(f"--sweep names '{name}' twice; give all its values at once.")
        try:
            sweep[name] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            message = f"--sweep {spec}: values must be numbers, e.g. {name}=1e-4,3e-4."
            raise ConfigError(message) from None
        if not sweep[name]:
            raise ConfigError(f"--sweep {spec}: give at least one value, e.g. {name}=1e-4,3e-4.")
    return sweep


@dataclasses.dataclass(frozen=True)
class Batch:
    """The entries of a run: `points` (swept values) x `seeds`, point-major."""

    config: Any
    sweep: dict[str, list[float]]
    points: list[dict[str, float]]
    point_configs: list[Any]
    seeds: list[int]

    @property
    def size(self) -> int:
        return len(self.points) * len(self.seeds)

    @property
    def labels(self) -> list[str]:
        """One name per entry: `seed_3`, or `point_1/seed_3` in a sweep."""
        prefix = [f"point_{p}/" if self.sweep else "" for p in range(len(self.points))]
        return [f"{pre}seed_{seed}" for pre in prefix for seed in self.seeds]

    def inputs(self) -> tuple[Any, Any]:
        """Configs (float fields as `[size]` arrays) and keys, one per entry."""
        entries = [c for c in self.point_configs for _ in self.seeds]
        configs = jax.tree.map(lambda *xs: np.asarray(xs, np.float32), *entries)
        keys = jnp.tile(seed_keys(self.seeds[0], len(self.seeds)), len(self.points))
        return configs, keys

    def arrange(self, x: Any) -> Any:
        """`[size, ...]` -> `[points, seeds, ...]` with a sweep, unchanged without."""
        x = x[: self.size]  # padding dropped (typed keys too, so no NumPy here)
        return x.reshape((len(self.points), len(self.seeds)) + x.shape[1:]) if self.sweep else x


def make_batch(config: Any, sweep: dict[str, list[float]] | None = None) -> Batch:
    """The batch of `config` over its seeds and the grid of `sweep`; every point's config is
    built (and so range-checked) here, before anything compiles."""
    sweep = sweep or {}
    if config.num_seeds < 1:
        raise ConfigError(f"num_seeds must be positive, got {config.num_seeds}.")
    points = [
        dict(zip(sweep, values, strict=True)) for values in itertools.product(*sweep.values())
    ]
    point_configs = [dataclasses.replace(config, **values) for values in points]
    seeds = list(range(config.seed, config.seed + config.num_seeds))
    return Batch(config, sweep, points, point_configs, seeds)
