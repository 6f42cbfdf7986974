"""Algorithm-agnostic plumbing for canter; importing it changes nothing in JAX.

Environments (`envs`, `wrappers`), evaluation, the replay buffer and initialiser that several
algorithms share, and the host runner split by job: `batch` (seeds x sweep points), `devices`
(CPU cores as devices, sharding; the device split happens when a run starts), `rundir` (the run
directory's layout), `checkpoint`, `logging` (metric sinks), `report`, `runner`, `cli`.
"""
