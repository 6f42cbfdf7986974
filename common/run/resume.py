"""What a resumed run may change: nothing, or a larger budget ("train longer"), checked before
anything compiles.

A larger `total_timesteps` alone continues the run exactly when the programs of `start` and of
one `interval` are the same for both budgets (traced, not compiled): the continued run then
equals one started with the new budget. Where they differ (a schedule over the budget: an
annealed learning rate, an epsilon decay; a last interval cut short), the continuation is
refused, with the two ways on: `extend` (`--extend`), or a new run.

`extend` continues anyway. The schedules over the budget are functions of the step and of
`total_timesteps` in every algorithm file, so they follow the new budget from the resume point
on: each later step uses the learning rate (epsilon, ...) that a run started with the new budget
uses at that step, as SB3's `learn(reset_num_timesteps=False)` does. The annealed learning rate
therefore jumps up where the run is extended (PPO's default, doubled: from about 0 to half its
start). Chosen over stretching each schedule from its current value, which would need every
file (and every fork) to carry its schedules' state, and over restarting them, which repeats
the warm start a run has had. An old run whose last interval was cut short (its budget not
whole intervals) re-enters that interval: the iterations it trained are skipped
(`Train.done_iterations`), the rest are trained, and its evaluation replaces the cut one, which
config.json keeps under `extended`. A state whose shapes depend on the budget (a replay buffer
sized by it) cannot be extended.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from canter.common.run.batch import Batch, make_batch
from canter.common.run.rundir import RunDir


def check_resume(
    out: RunDir, record: dict, make_train: Callable, batch: Batch, extend: bool = False
) -> tuple[int, dict]:
    """(intervals done, saved record) of the checkpoint in `out`, refusing before anything
    compiles a config that differs from the saved one, and a larger total_timesteps whose run
    would differ from one started with it, unless `extend`."""

    def longer(saved: dict) -> str | None:
        before = dataclasses.replace(batch.config, total_timesteps=saved["total_timesteps"])
        if extend:
            return _shapes_differ(make_train, make_batch(before, batch.sweep), batch)
        traced(make_train, batch)  # a process's first trace can hold constants later ones share
        if _same(traced(make_train, make_batch(before, batch.sweep)), traced(make_train, batch)):
            return None
        causes = why_not_longer(make_train(before), before, make_train(batch.config))
        return refusal(causes, make_train(before), make_train(batch.config))

    return out.check_resume(record, longer)


def done_iterations(make_train: Callable, config: Any, saved: dict, done: int) -> int:
    """The iterations a run saved after `done` intervals trained, where they do not end on
    `config`'s interval grid (an extended run whose last interval was cut short: it re-enters
    that interval, skipping them); else 0."""
    if saved["total_timesteps"] == config.total_timesteps:
        return 0
    old = make_train(dataclasses.replace(config, total_timesteps=saved["total_timesteps"]))
    trained = min(done * old.interval_iterations, old.num_iterations)
    return 0 if trained == done * make_train(config).interval_iterations else trained


def resumed_train(make_train: Callable, skip: int) -> Callable:
    """`make_train` whose Train skips the first `skip` iterations (0: `make_train` itself)."""
    if not skip:
        return make_train
    return lambda config: dataclasses.replace(make_train(config), done_iterations=skip)


# Config fields that make a schedule over the whole budget, and what they schedule.
SCHEDULES = {
    "anneal_lr": "anneals the learning rate over the budget",
    "exploration_fraction": "decays epsilon over a fraction of the budget",
}


def why_not_longer(train: Any, config: Any, longer: Any = None) -> list[str]:
    """Why a run of `config` (built into `train`) continued to a larger budget (the run
    `longer` would train) would not equal a run started with it: each cause that holds."""
    causes = []
    if train.interval_iterations >= train.num_iterations:
        causes.append("its one evaluation interval covered the whole run")
    elif train.num_iterations % train.interval_iterations:
        causes.append(
            f"its last interval was cut short ({train.num_iterations} iterations are not whole "
            f"intervals of {train.interval_iterations})"
        )
    for name, what in SCHEDULES.items():
        if getattr(config, name, False) not in (False, None):
            causes.append(f"{name} = {getattr(config, name)} {what}")
    if longer is not None and longer.num_iterations % longer.interval_iterations:
        causes.append(
            f"the new budget ends in a part interval (evaluations come every "
            f"{longer.eval_every:,} env steps)"
        )
    return causes or ["its program depends on the budget (a schedule over it)"]


def refusal(causes: list[str], old: Any, new: Any) -> str:
    """The refusal's reasons and the two ways on: `--extend`, or (where a part interval of the
    new budget is the only cause) whole intervals, else a new run."""
    why = "; ".join(causes)
    ways = "continue anyway with --extend (the schedules then follow the new budget from here: "
    ways += "docs/running.md, 'Extending a run')"
    if len(causes) == 1 and causes[0].startswith("the new budget"):
        step, trained = new.eval_every, old.num_iterations * old.env_steps_per_iteration
        above = (trained // step + 1) * step
        ways += f", or continue to whole intervals (--total-timesteps {above} or {above + step})"
    else:
        total = new.num_iterations * new.env_steps_per_iteration
        ways += f", or start a new run with --total-timesteps {total}"
    lead = "the continued run would not equal one started with the new budget"
    return f"{lead}, as {why}. Either {ways}"


def traced(make_train: Callable, batch: Batch) -> list:
    """The jaxprs of `start` and of one `interval` over `batch` (tracing, no compiling)."""
    configs, keys = batch.inputs()
    start = jax.vmap(lambda c, k: make_train(c).start(k))
    interval = jax.vmap(lambda c, s, k, i: make_train(c).interval(s, k, i), in_axes=(0, 0, 0, None))
    state, key = jax.eval_shape(start, configs, keys)
    index = jax.ShapeDtypeStruct((), jnp.int32)
    return [
        jax.make_jaxpr(start)(configs, keys),
        jax.make_jaxpr(interval)(configs, state, key, index),
    ]


def _shapes_differ(make_train: Callable, before: Batch, after: Batch) -> str | None:
    """Why the state saved under the old budget cannot be read by the new one, or None."""

    def shapes(batch: Batch) -> Any:
        state = jax.eval_shape(jax.vmap(lambda c, k: make_train(c).start(k)), *batch.inputs())
        return jax.tree.map(lambda x: (x.shape, x.dtype), state)

    if shapes(before) == shapes(after):
        return None
    return "the shapes of its train state depend on the budget (a buffer sized by it)"


def _same(a: list, b: list) -> bool:
    """Whether two lists of closed jaxprs are the same program: text and constants."""

    def data(x: Any) -> np.ndarray:
        is_key = jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)
        return np.asarray(jax.random.key_data(x) if is_key else x)

    for x, y in zip(a, b, strict=True):
        if str(x) != str(y) or len(x.consts) != len(y.consts):
            return False
        for c, d in zip(x.consts, y.consts, strict=True):
            try:
                if not np.array_equal(data(c), data(d)):
                    return False
            except (TypeError, ValueError):  # not an array: only the same object is the same
                if c is not d:
                    return False
    return True
