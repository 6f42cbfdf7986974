"""Algorithm-agnostic plumbing for canter.

Importing this package sets up JAX's CPU client before it exists (gymnax creates it on import):

- One XLA CPU device per available core. The host runner shards seeds (and sweep points) over
  devices, and XLA:CPU runs each device's program on its own thread, while one seed of a small
  network keeps about one core busy. Measured on 2 cores, PPO CartPole, 512k steps: 8 seeds
  ran in 9.1 s instead of 17.0 s; one seed was unchanged (3.1 s). Set JAX_NUM_CPU_DEVICES (or
  XLA_FLAGS=--xla_force_host_platform_device_count=N) to choose otherwise. Accelerators are
  unaffected: the CPU devices are then not the default backend.
- Asynchronous dispatch off (jax-ml/jax#25861 reports deadlocks with it). Runs here once hung at
  0% CPU; the cause turned out to be LAPACK's QR (common/initializers.py), but the host runner
  waits for every interval anyway, so inline dispatch costs nothing and stays.
"""

import os

import jax

jax.config.update("jax_cpu_enable_async_dispatch", False)
if jax.config.jax_num_cpu_devices == -1 and "device_count" not in os.environ.get("XLA_FLAGS", ""):
    try:
        jax.config.update("jax_num_cpu_devices", len(os.sched_getaffinity(0)))
    except RuntimeError:  # JAX already ran something before this import: keep its devices
        pass
