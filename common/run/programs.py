"""The two compiled programs of a run, `start` and `intervals`, vmapped over the batch axis
(sweep points x seeds, common/run/batch.py) and laid out over the devices (common/run/devices.py).

`intervals` computes a run of consecutive intervals in one call, as many as the host asks for
(up to `Programs.chunk`, a loop with a run-time trip count: one compiled program for every
count), with each interval's metrics and divergence flag kept apart. Each call of a compiled
program costs a few milliseconds on XLA:CPU whatever it computes, so the host asks for as many
intervals as it has nothing to do between (common/run/cadence.py, `Pace`).

The host loop that calls them is common/run/runner.py; this file decides only what is compiled and
where its values live.
"""

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from canter.common.run import health
from canter.common.run.batch import Batch, make_batch
from canter.common.run.devices import batch_shardings, env_shardings, pad, place
from canter.common.run.interrupts import interruptible
from canter.common.run.rundir import RunDir


@dataclasses.dataclass
class Programs:
    """The two compiled programs of a run (start, intervals) and their inputs, on the devices;
    `state_sharding` lays out the state (its env axis split along "data" when data-parallel).

    `intervals(configs, state, eval_keys, first, count)` computes intervals `first` to
    `first + count - 1` (1 <= count <= `chunk`): the state after the last, and metrics and
    divergence flags with an axis of `chunk` after the batch axis, of which the first `count`
    entries are this call's intervals."""

    start: Any
    intervals: Any
    configs: Any
    keys: Any
    state_shape: Any
    sharded: Any
    state_sharding: Any
    padded: int
    compile_s: float
    chunk: int

    @property
    def layout(self) -> str:
        rows, data = self.sharded.mesh.shape["batch"], self.sharded.mesh.shape["data"]
        if data > 1:
            return f"{rows}x{data} devices (data-parallel)"
        return f"{rows} device" + ("s" if rows != 1 else "")


def compile_programs(
    make_train: Callable, batch: Batch, data_parallel: bool = False, one_device: bool = False
) -> Programs:
    """Compile `start` and `intervals` of `make_train`, vmapped over the batch and sharded.

    Inside the trace `make_train` sees float fields as tracers; it builds nothing static there
    (environments come from make_env's cache, ranges were checked when the configs were made).
    Data-parallel (`data_parallel` and fewer entries than devices), each entry's env axis is
    split over the mesh's "data" axis and the mesh is set while tracing, so that minibatches
    are split too (common/run/devices.py, `shard_minibatch`); XLA averages the gradients
    across the split. Sharding annotations change where values live, never what they are.
    """
    sharded, replicated, padded = batch_shardings(batch.size, data_parallel, one_device)
    configs, keys = (place(pad(x, padded), sharded) for x in batch.inputs())
    mesh = sharded.mesh
    start = jax.vmap(lambda c, k: make_train(c).start(k), spmd_axis_name="batch")

    chunk = _chunk(make_train(batch.config).num_intervals)

    def interval(config: Any, state: Any, key: Any, index: Any) -> tuple:
        return make_train(config).interval(state, key, index)

    def checked_intervals(config: Any, state: Any, key: Any, first: Any, count: Any) -> tuple:
        # Traced once, here, for the loop's body and the metric buffers' shapes alike: the
        # algorithm's Python runs once per program.
        traced, shapes = jax.make_jaxpr(interval, return_shape=True)(config, state, key, first)
        run_interval = jax.extend.core.jaxpr_as_fun(traced)

        def one(j: Any, carry: tuple) -> tuple:
            state, metrics, ok = carry
            flat = run_interval(*jax.tree.leaves((config, state, key, first + j)))
            state, these = jax.tree.unflatten(jax.tree.structure(shapes), flat)
            metrics = jax.tree.map(lambda kept, x: kept.at[j].set(x), metrics, these)
            return state, metrics, ok.at[j].set(health.finite(state, these))

        metrics = jax.tree.map(lambda s: jnp.zeros((chunk, *s.shape), s.dtype), shapes[1])
        ok = jnp.ones(chunk, bool)
        return jax.lax.fori_loop(0, count, one, (state, metrics, ok))

    def single_intervals(config: Any, state: Any, key: Any, first: Any, count: Any) -> tuple:
        # One entry (on one device, or data-parallel over several): no vmap, so each `lax.cond`
        # (replay warm-up, TD3's delayed actor, a ragged interval) runs one branch instead of
        # both and a select, and no op carries a batch axis of one (data-parallel PPO CartPole,
        # 1024 envs, 2 CPU devices: 1.71x -> 0.91x rejax's run time); same numbers.
        only = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
        out = checked_intervals(only(config), only(state), only(key), first, count)
        return jax.tree.map(lambda x: x[None], out)

    batched = jax.vmap(checked_intervals, in_axes=(0, 0, 0, None, None), spmd_axis_name="batch")

    tic = time.perf_counter()
    with jax.set_mesh(mesh) if mesh.shape["data"] > 1 else contextlib.nullcontext():
        state_shape, key_shape = jax.eval_shape(start, configs, keys)
        num_envs = getattr(batch.config, "num_envs", 0)
        state_sharding = env_shardings(state_shape, sharded, num_envs)
        start_jit = jax.jit(start, out_shardings=(state_sharding, sharded))
        intervals_jit = jax.jit(
            single_intervals if padded == 1 else batched,
            in_shardings=(sharded, state_sharding, sharded, replicated, replicated),
            out_shardings=(state_sharding, sharded, sharded),
            donate_argnums=1,
        )
        compiled_start = start_jit.lower(configs, keys).compile()
        index = jax.ShapeDtypeStruct((), jnp.int32)
        args = (configs, state_shape, key_shape, index, index)
        intervals = intervals_jit.lower(*args).compile()
    compile_s = time.perf_counter() - tic
    return Programs(
        compiled_start,
        intervals,
        configs,
        keys,
        state_shape,
        sharded,
        state_sharding,
        padded,
        compile_s,
        chunk,
    )


def _chunk(num_intervals: int) -> int:
    """The most intervals one call computes: the whole run, up to 64 (each call returns a
    metric buffer of this length, whatever it computed)."""
    return min(num_intervals, 64)


def compile_claimed(
    claim: RunDir | None, record: dict, make_train: Callable, batch: Batch, *args: Any
) -> Programs:
    """`compile_programs(make_train, batch, *args)` after claiming the run directory `claim`
    (config.json `record`, created exclusively: two processes never share a directory), on a
    helper thread: SIGTERM or SIGINT meanwhile raises `Interrupted` at once (exit 75 from the
    command line) and undoes the claim, as nothing was trained (common/run/interrupts.py)."""
    created = claim.claim(record) if claim is not None else False
    # Under multi-host, compile on the main thread: a signal there stops one process of several,
    # which the coordination service turns into every process's exit anyway.
    compile_on = interruptible if jax.process_count() == 1 else lambda fn, *a: fn(*a)
    try:
        return compile_on(compile_programs, make_train, batch, *args)
    except BaseException:
        if claim is not None:
            claim.release(created)
        raise


def check_resume(out: RunDir, record: dict, make_train: Callable, batch: Batch) -> tuple:
    """(intervals done, saved record) of the checkpoint in `out`, refusing before anything
    compiles a config that differs from the saved one. A larger total_timesteps ("train
    longer") is allowed exactly when the programs of `start` and of one `interval` are the same
    for both budgets (traced, not compiled): then the continued run equals one started with the
    new budget. A schedule over the budget (an annealed learning rate, an exploration
    fraction) or a ragged last interval makes them differ, and the run is refused."""

    def longer(saved: dict) -> str | None:
        before = dataclasses.replace(batch.config, total_timesteps=saved["total_timesteps"])
        traced(make_train, batch)  # a process's first trace can hold constants later ones share
        if _same(traced(make_train, make_batch(before, batch.sweep)), traced(make_train, batch)):
            return None
        why = why_not_longer(make_train(before), before, make_train(batch.config))
        return f"{why}, so the continued run would not equal a run started with the new budget"

    return out.check_resume(record, longer)


# Config fields that make a schedule over the whole budget: False where the bool flag turns it
# off (`--no-<flag>`), None where no value does.
SCHEDULES = {"anneal_lr": False, "exploration_fraction": None}


def why_not_longer(train: Any, config: Any, longer: Any = None) -> str:
    """Why a run of `config` (built into `train`) cannot be continued to a larger budget (the
    run `longer` would train): each cause that holds (one interval for the whole run, a ragged
    last interval, a schedule over the budget, a new budget of a ragged last interval), with
    the flags that avoid it in a run meant to be extended."""
    causes = []
    if longer is not None and longer.num_iterations % longer.interval_iterations:
        step = longer.eval_every
        below = (longer.num_intervals - 1) * step
        causes.append(
            f"the new --total-timesteps leaves a ragged last interval: continue to a multiple "
            f"of {step} env steps, such as {below} or {below + step}"
        )
    if train.interval_iterations >= train.num_iterations:
        causes.append(
            "its eval_every covered the whole run (one interval): start it with an --eval-every "
            "below --total-timesteps"
        )
    elif train.num_iterations % train.interval_iterations:
        whole = (train.num_intervals - 1) * train.eval_every
        causes.append(
            f"its last interval is ragged ({train.num_iterations} iterations are not whole "
            f"intervals of {train.interval_iterations}): start it with a --total-timesteps that "
            f"is a multiple of its {train.eval_every} env steps between evaluations, such as "
            f"{whole} or {whole + train.eval_every}"
        )
    for name, off in SCHEDULES.items():
        if not hasattr(config, name) or (off is not None and getattr(config, name) == off):
            continue
        flag = name.replace("_", "-")
        fix = "no value of it avoids that" if off is None else f"start it with --no-{flag}"
        causes.append(f"{name} = {getattr(config, name)} schedules over the whole budget: {fix}")
    if not causes:
        causes.append("its program depends on the budget (a schedule over it)")
    return "; and ".join(causes)


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
