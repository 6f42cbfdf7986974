"""`--debug`: the algorithm file runs eagerly on a tiny budget, checking for NaNs as it goes.

JAX's `jax_disable_jit` runs every `jax.jit`, `lax.scan` and `lax.cond` as plain Python, so a
`breakpoint()` (or a debugger's) inside `step` stops with concrete arrays. One seed, no sweep
and no vmap (a vmapped value is a tracer even without jit), a budget of `iterations` iterations,
each followed by an evaluation (compiled: it is not what one steps through); other flags apply
as given. Nothing is written.

NaN checks: after every iteration each float in the state (parameters, optimiser moments,
buffers, normalisers) must be finite, and the first that is not stops the run with its path in
the state and the iteration. JAX's own `jax_debug_nans` is left off: canter's metrics use NaN
on purpose ("no episode ended yet", "update skipped": algorithms/trainer.py, `when`), and every
operation those pass through (a scan stacking them, a mean) would stop it.
"""

import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.run.batch import seed_keys


def tiny(config: Any, make_train: Callable, iterations: int) -> Any:
    """`config` for one seed and `iterations` iterations, each followed by an evaluation."""
    per_iteration = make_train(config).env_steps_per_iteration
    try:
        return dataclasses.replace(
            config,
            num_seeds=1,
            eval_every=per_iteration,
            total_timesteps=iterations * per_iteration,
        )
    except ConfigError as error:
        raise ConfigError(f"--debug runs {iterations} iterations, but: {error}") from None


def first_non_finite(state: Any) -> str | None:
    """The path of the first float leaf of `state` holding a NaN or inf, or None."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            if not bool(jnp.all(jnp.isfinite(leaf))):
                return jax.tree_util.keystr(path)
    return None


def run_debug(
    config: Any, make_train: Callable, *, algo: str, iterations: int = 2, say: Callable = print
) -> list[dict[str, dict[str, float]]]:
    """Run `config` eagerly for `iterations` iterations; the metrics of each (host floats).

    Raises FloatingPointError at the first iteration that leaves a NaN or inf in the state.
    """
    config = tiny(config, make_train, iterations)
    say(
        f"debug: {algo} on {config.env}: jit off (jax_disable_jit), NaN/inf check of the state "
        f"after every iteration, seed {config.seed} only, {iterations} iterations of "
        f"{config.total_timesteps // iterations:,} env steps, an evaluation after each, nothing "
        "written. A breakpoint() in step stops there with real values."
    )
    history = []
    with jax.disable_jit():
        train = make_train(config)
        state, eval_key = train.start(seed_keys(config.seed, 1)[0])
    evaluate = jax.jit(train.evaluate)  # evaluation episodes, compiled: not what one steps through
    for i in range(iterations):
        if i == 0:  # the first eager iteration: tens of seconds without a word otherwise
            say(
                "debug: iteration 1 runs eagerly, each operation compiled on its first use and "
                "dispatched from Python: tens of seconds (PPO's defaults: 30-50 s on 2 busy CPU "
                "cores, the next iterations a few)"
            )
        tic = time.perf_counter()
        with jax.disable_jit():
            state, metrics = train.step(state, jnp.int32(i))
        bad = first_non_finite(state)
        if bad is not None:
            raise FloatingPointError(
                f"iteration {i + 1}: the state's {bad} holds a NaN or inf. Set a breakpoint() "
                "in step and run --debug again to see where it appears."
            )
        metrics = {"train": metrics, "eval": evaluate(state, jax.random.fold_in(eval_key, i))}
        with warnings.catch_warnings():  # an all-NaN metric: nothing happened yet
            warnings.simplefilter("ignore", RuntimeWarning)
            history.append(jax.tree.map(lambda x: float(np.nanmean(np.asarray(x))), metrics))
        shown = [f"{g}/{k} {v:.4g}" for g, m in history[-1].items() for k, v in m.items()]
        say(f"[{i + 1}/{iterations}] {time.perf_counter() - tic:.1f} s  " + "  ".join(shown))
    return history
