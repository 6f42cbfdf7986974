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
from canter.common.run import health
from canter.common.run.batch import Batch
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
