"""What the algorithm files share, grouped by role (docs/design.md, "The map of common/").

    config.py   Config as a pytree: float fields traced, the rest static; ranges; ConfigError
    envs/       make_env and the adapters behind it; changes what the learner sees
    blocks/     a few number-changing building blocks, used by name, each tested
    run/        the host runner (CLI, run directory, checkpoints, devices); never changes a number

Importing it changes nothing in JAX: the device split happens when a run starts.
"""
