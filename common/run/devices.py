"""Where a run's batch axis (sweep points x seeds) lives: CPU cores as devices, sharding, gathering.

`use_cpu_cores()` is called when a run starts (`trainer.run`, the CLI), never on import:

- One XLA CPU device per available core. The runner shards seeds (and sweep points) over
  devices, and XLA:CPU runs each device's program on its own thread, while one seed of a small
  network keeps about one core busy. Measured on 2 cores, PPO CartPole, 512k steps: 8 seeds
  ran in 9.1 s instead of 17.0 s; one seed was unchanged (3.1 s). JAX fixes its devices when it
  first computes something, so this only acts before that (a notebook that already ran JAX keeps
  its devices). Set JAX_NUM_CPU_DEVICES (or XLA_FLAGS=--xla_force_host_platform_device_count=N)
  to choose otherwise. Accelerators are unaffected: the CPU devices are then not the default.
- Asynchronous dispatch off (jax-ml/jax#25861 reports deadlocks with it). Runs here once hung at
  0% CPU; the cause turned out to be LAPACK's QR (common/blocks/initializers.py), but the
  runner waits for every interval anyway, so inline dispatch costs nothing and stays.
"""

import itertools
import os
from typing import Any

import jax
import numpy as np
from canter.common.run import keys
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, PyTree


def use_cpu_cores() -> None:
    """One XLA CPU device per available core and synchronous CPU dispatch, if JAX has not
    started yet and the user chose no device count."""
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return  # JAX already runs: its devices are fixed for this process
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    if jax.config.jax_num_cpu_devices == -1 and "device_count" not in os.environ.get(
        "XLA_FLAGS", ""
    ):
        jax.config.update("jax_num_cpu_devices", len(os.sched_getaffinity(0)))


def memory_bytes() -> tuple[int, str]:
    """(bytes of memory the run's devices have in all, what they are): each accelerator's
    allocator limit (the local devices', times the processes of a multi-host run), or on a CPU
    the machine's physical memory."""
    devices = jax.local_devices()
    if devices[0].platform == "cpu":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return total, "this machine's memory (CPU)"
    try:
        stats = [d.memory_stats() or {} for d in devices]
    except Exception:  # a backend without memory statistics: unknown (0), nothing refused
        return 0, "unknown"
    total = sum(s.get("bytes_limit", 0) for s in stats) * jax.process_count()  # every host's
    return total, f"{len(devices) * jax.process_count()} {devices[0].device_kind} device(s)"


def batch_shardings(
    size: int, data_parallel: bool = False, one_device: bool = False
) -> tuple[NamedSharding, NamedSharding, int]:
    """Shardings of a batch axis of `size` entries over the devices, and its padded size.

    The mesh has axes ("batch", "data"). Every process's devices take part under
    jax.distributed (multi-host). On one process no device only computes padding: with fewer
    entries than devices, one seed keeps every core, unless `data_parallel`, which gives each
    entry `devices // size` devices along "data" to split its envs and minibatches over.
    `one_device` keeps the whole batch on the first device (host envs, common/envs/host.py: their
    callback runs on one device, and a batch split over several would be gathered to it).
    """
    devices = jax.devices()[:1] if one_device else jax.devices()
    data = len(devices) // size if data_parallel and size < len(devices) else 1
    if jax.process_count() == 1:
        devices = devices[: size * data]
    mesh = Mesh(np.array(devices).reshape(-1, data), ("batch", "data"))
    rows = mesh.shape["batch"]
    padded = -(-size // rows) * rows
    return NamedSharding(mesh, PartitionSpec("batch")), NamedSharding(mesh, PartitionSpec()), padded


def env_shardings(shapes: Any, sharded: NamedSharding, num_envs: int) -> Any:
    """Per leaf of a batched state: split along "data" where the axis after the batch axis is
    the env axis (`num_envs` long, divisible by the data axis), else `sharded`. A sharding
    never changes a result, so a leaf that only looks like it has an env axis costs nothing."""
    data = sharded.mesh.shape["data"]
    split = NamedSharding(sharded.mesh, PartitionSpec("batch", "data"))

    def choose(x: Any) -> NamedSharding:
        env_axis = len(x.shape) >= 2 and x.shape[1] == num_envs and num_envs % data == 0
        return split if data > 1 and env_axis else sharded

    return jax.tree.map(choose, shapes)


def pad(tree: Any, size: int) -> Any:
    """Host values with leading axis `b` padded to `size` by repeating the last entry."""

    def grow(x: Any) -> Any:
        x = np.asarray(x)
        return np.concatenate([x, np.repeat(x[-1:], size - x.shape[0], axis=0)])

    return keys.from_data(jax.tree.map(grow, keys.to_data(tree)), tree)


def place(tree: Any, sharding: Any) -> Any:
    """Host values, the same on every process, as global arrays laid out by `sharding` (one
    NamedSharding, or a tree of them matching `tree`)."""

    def put(x: Any, where: NamedSharding) -> jax.Array:
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, where, lambda index: x[index])

    if isinstance(sharding, NamedSharding):
        sharding = jax.tree.map(lambda _: sharding, tree)
    return keys.from_data(jax.tree.map(put, keys.to_data(tree), sharding), tree)


def gather(tree: Any) -> Any:
    """The whole of `tree` as NumPy on this process, whichever process holds each shard (a
    collective under multi-host: every process must call it). Keys stay typed keys."""
    data = keys.to_data(tree)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        data = multihost_utils.process_allgather(data, tiled=True)
    return keys.from_data(jax.device_get(data), tree)


_barriers = itertools.count()


def wait_for_processes(name: str, timeout_s: float = 3600.0) -> None:
    """Under multi-host, wait until every process gets here; elsewhere nothing. This is the
    coordination service's barrier, not a collective: gloo gives up on a process that comes
    more than 30 s late to the first collective, as a slower compile on a loaded host can."""
    if jax.process_count() == 1:
        return
    from jax._src import distributed  # the client jax.distributed.initialize made

    barrier = f"canter-{name}-{next(_barriers)}"  # the same sequence on every process
    distributed.global_state.client.wait_at_barrier(barrier, int(timeout_s * 1000))


def shard_minibatch(minibatch: PyTree) -> PyTree:
    """In a data-parallel run (the runner sets a mesh with a "data" axis while tracing), a
    minibatch's samples (axis 0 of each leaf) are split over the "data" devices, so each
    computes the gradient of its part and XLA sums them; elsewhere `minibatch` as it is.
    Changes no number."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or "data" not in mesh.axis_names or mesh.shape["data"] == 1:
        return minibatch
    data = mesh.shape["data"]

    def constrain(x: Array) -> Array:
        if x.ndim < 1 or x.shape[0] % data:
            return x
        return jax.lax.with_sharding_constraint(x, PartitionSpec("data"))

    return jax.tree.map(constrain, minibatch)
