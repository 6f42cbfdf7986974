"""Evaluate a trained run: load its checkpoint, run greedy episodes per seed, optionally a GIF.

    python algorithms/evaluate.py runs/CartPole-v1__ppo__0__20261122-080000 --episodes 32
    python algorithms/evaluate.py RUN_DIR --gif cartpole.gif

Works for every algorithm whose run directory holds `config.json` and `checkpoint.eqx`.
"""

import dataclasses
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tyro

from algorithms import trainer
from common import checkpoint
from common.config import ConfigError
from common.envs import make_env

# Frames of classic-control environments are drawn with pygame, which needs no screen this way.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def load_run(run_dir: Path, episodes: int) -> tuple[Any, Any, Any, Any, dict]:
    """The algorithm module, its config, the batched configs and state of a run's checkpoint."""
    try:
        saved = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        raise ConfigError(
            f"{run_dir} has no readable config.json: is it a run directory?"
        ) from None
    algo, sweep = saved.pop("algo"), saved.pop("sweep", {})
    module = importlib.import_module(f"algorithms.{algo}")
    config = dataclasses.replace(module.Config(**saved), num_eval_envs=episodes)
    header, _ = checkpoint.read_header(run_dir / "checkpoint.eqx")
    configs, keys, batch, _ = trainer.make_batch(config, sweep, header["devices_batch"])

    def start_one(cfg: Any, key: jax.Array) -> Any:
        return module.make_train(cfg).start(key)[0]

    like = jax.eval_shape(jax.vmap(start_one), configs, keys)
    loaded, header = checkpoint.load(run_dir / "checkpoint.eqx", {"state": like}, {"algo": algo})
    return module, config, configs, loaded["state"], {"batch": batch, "sweep": sweep, **header}


def render_gif(module: Any, config: Any, configs: Any, state: Any, index: int, path: Path):
    """Render one greedy episode of batch entry `index` with gymnax's visualiser."""
    from gymnax.visualize import Visualizer

    cfg = jax.tree.map(lambda x: x[index], configs)
    one_state = jax.tree.map(lambda x: x[index], state)
    train = module.make_train(cfg)
    if train.act is None:
        raise ConfigError(f"{module.__name__} exposes no greedy `act`, so it cannot render.")
    env, env_params = make_env(config.env)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    act = jax.jit(lambda obs: train.act(one_state, obs[None])[0])
    key = jax.random.key(config.seed)
    obs, env_state = reset(key, env_params)
    states, returns, total = [env_state.env_state], [0.0], 0.0
    for _ in range(int(env_params.max_steps_in_episode)):
        key, step_key = jax.random.split(key)
        obs, next_state, reward, terminated, truncated, _ = step(
            step_key, env_state, act(obs), env_params
        )
        total += float(reward)
        if terminated or truncated:
            break
        env_state = next_state
        states.append(env_state.env_state)
        returns.append(total)
    base_env = env._env._env  # below the statistics and flattening wrappers
    try:
        Visualizer(base_env, env_params, states, jnp.array(returns)).animate(str(path))
    except Exception as error:  # gymnax raises various types for envs it cannot draw
        raise ConfigError(f"gymnax cannot render {config.env}: {error}") from None
    return total, len(states)  # the last state, before the auto-reset, is not drawn


def main(
    run_dir: Path, /, episodes: int = 16, gif: Path | None = None, gif_entry: int = 0
) -> dict[str, Any]:
    """Greedy evaluation of every seed (and sweep point) of a run's last checkpoint.

    Args:
        run_dir: The run directory (holds config.json and checkpoint.eqx).
        episodes: Greedy episodes per seed, each on a fresh environment.
        gif: Also render one greedy episode to this GIF file.
        gif_entry: Which seed (index in the run, point-major in a sweep) to render.
    """
    module, config, configs, state, header = load_run(run_dir, episodes)
    batch = header["batch"]

    def evaluate_one(cfg: Any, state: Any, key: jax.Array) -> dict[str, jax.Array]:
        return module.make_train(cfg).evaluate(state, key)

    # Fresh evaluation keys, apart from the ones training used.
    keys = jax.random.split(jax.random.key(config.seed + 1_000_003), header["devices_batch"])
    metrics = jax.jit(jax.vmap(evaluate_one))(configs, state, keys)
    returns = np.asarray(metrics["episodic_return"])[:batch]
    print(f"{run_dir}: checkpoint after interval {header['interval']}, {episodes} episodes each")
    for b, value in enumerate(returns):
        print(f"  entry {b}: mean return {value:.2f}")
    print(f"mean over entries {returns.mean():.2f} +- {returns.std():.2f} ({batch} entries)")
    result = {
        "returns": returns.tolist(),
        "mean": float(returns.mean()),
        "std": float(returns.std()),
    }
    if gif is not None:
        total, length = render_gif(module, config, configs, state, gif_entry, gif)
        print(f"wrote {gif}: entry {gif_entry}, return {total:.2f} over {length} steps")
    return result


if __name__ == "__main__":
    try:
        tyro.cli(main)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
