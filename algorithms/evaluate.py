"""Evaluate a trained run: load its checkpoint, run episodes per seed, optionally a GIF.

    python algorithms/evaluate.py runs/CartPole-v1__ppo__0__20261122-080000 --episodes 32
    python algorithms/evaluate.py RUN_DIR --gif cartpole.gif

Works for every algorithm, forks anywhere included: config.json records the file that made the
run (common/run/rundir.py). Each algorithm supplies `act`; evaluation and rendering are built
from it (common/run/evaluation.py, `policy`), with the memory of a recurrent policy carried
along. Outside the repository: `python -m canter.algorithms.evaluate RUN_DIR`.
"""

import dataclasses
import importlib
import importlib.util
import io
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tyro
from canter.common.config import ConfigError
from canter.common.envs import base_state, is_host_env, vector_mask
from canter.common.run import checkpoint, evaluation
from canter.common.run.batch import make_batch
from canter.common.run.files import atomic_write
from canter.common.run.rundir import RunDir
from PIL import Image

# Frames of classic-control environments are drawn with pygame, which needs no screen this way.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
# MuJoCo frames need an OpenGL context; without a display, MuJoCo's default (GLFW) has none, so
# render offscreen through EGL (set MUJOCO_GL yourself for another backend: osmesa, glfw).
if (
    not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    and sys.platform != "darwin"
):
    os.environ.setdefault("MUJOCO_GL", "egl")


def load_algorithm(out: RunDir, algorithm: Path | None = None) -> ModuleType:
    """The algorithm module that made the run in `out`: the file `algorithm` if given, else
    config.json's `source` (its module if importable, else its file), else (runs written
    before `source` existed) the house file of the run's `algo`."""
    record = out.read_config()
    source = record.get("source") or {"file": None, "module": f"canter.algorithms.{record['algo']}"}
    if algorithm is None and source["module"] is not None:
        try:
            return importlib.import_module(source["module"])
        except ModuleNotFoundError:
            if source["file"] is None:
                gone = f"{out.path} was made by {source['module']}, which is gone"
                raise ConfigError(f"{gone}; point to its file with --algorithm PATH.") from None
    path = Path(algorithm or source["file"])
    if not path.is_file():
        raise ConfigError(
            f"{out.path} was made by {path}, which is not there any more; point to the "
            "algorithm file with --algorithm PATH."
        )
    sys.path.insert(0, str(path.parent))  # as `python path/to/file.py` would: its neighbours
    spec = importlib.util.spec_from_file_location(f"canter_run_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_run(run_dir: Path, episodes: int, algorithm: Path | None = None) -> tuple:
    """The algorithm module, the batch, batched configs and state of a run's last checkpoint."""
    out = RunDir(run_dir)
    module = load_algorithm(out, algorithm)
    algo, config, sweep = out.load_config(module.Config)
    batch = make_batch(dataclasses.replace(config, num_eval_envs=episodes), sweep)
    configs, keys = batch.inputs()
    start = jax.vmap(lambda c, k: module.make_train(c).start(k)[0])
    like = jax.eval_shape(start, configs, keys)
    loaded, header = checkpoint.load(out.checkpoint, {"state": like}, {"algo": algo})
    return module, batch, configs, loaded["state"], header


def render_gif(
    module: Any, configs: Any, state: Any, index: int, path: Path, seed: int, steps: int | None
) -> tuple:
    """Render one episode of batch entry `index`, as its `eval_policy` plays, to a GIF: its
    first `steps` steps where `steps` is set (else the whole episode, up to the env's limit)."""
    train = module.make_train(jax.tree.map(lambda x: x[index], configs))
    policy = jax.jit(evaluation.policy(train, jax.tree.map(lambda x: x[index], state)))
    env, env_params = train.env, train.env_params
    limit = min(int(env_params.max_steps_in_episode), steps or sys.maxsize)
    if is_host_env(env):  # a host (Gymnasium) env draws its own frames
        from canter.common.envs.host import render_episode

        carry = evaluation.start_carry(train, 1, jax.random.fold_in(jax.random.key(seed), 1))

        def act(obs: np.ndarray) -> jax.Array:  # carries a recurrent policy's memory along
            nonlocal carry
            action, carry = policy(jnp.asarray(obs)[None], carry)
            return action[0]

        frames, returns = render_episode(env.unwrapped, act, seed, limit)
        save_gif([Image.fromarray(frame) for frame in frames], returns, path)
        return returns[-1], len(frames) - 1
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    valid = jax.jit(vector_mask(env))
    key = jax.random.key(seed)
    obs, env_state = reset(key, env_params)
    carry = evaluation.start_carry(train, 1, jax.random.fold_in(key, 1))
    states, returns, total = [base_state(env_state)], [0.0], 0.0
    taken = 0
    while taken < limit:
        taken += 1
        key, step_key = jax.random.split(key)
        mask = valid(jax.tree.map(lambda x: x[None], env_state), env_params)
        bare = {"env_state": jax.tree.map(lambda x: x[None], base_state(env_state))}
        action, carry = policy(obs[None], carry, mask, **(bare if train.plans else {}))
        obs, next_state, reward, terminated, truncated, _ = step(
            step_key, env_state, action[0], env_params
        )
        total += float(reward)
        if terminated or truncated:
            break
        env_state = next_state
        states.append(base_state(env_state))
        returns.append(total)
    write_gif(env.unwrapped, env_params, states, returns, path)
    return total, taken  # the last state of an ended episode, before the auto-reset, is not drawn


def write_gif(env: Any, env_params: Any, states: list, returns: list[float], path: Path) -> None:
    """The frames of an env that draws itself (`frames(states)`: Playground, Brax, Craftax,
    Jumanji, XLand-MiniGrid, each with its suite's renderer); classic control straight from one
    Gymnasium renderer; other gymnax envs through gymnax's matplotlib visualiser. All written by
    Pillow. For 200 Pendulum frames the direct path took 3.3 s against 54 s (a fresh Gymnasium
    env per frame, three figure draws per frame)."""
    from gymnax.visualize import Visualizer, vis_gym

    if hasattr(env, "frames"):  # an adapter that draws itself (common/envs/)
        save_gif([Image.fromarray(frame) for frame in env.frames(states)], returns, path)
        return
    if env.name not in vis_gym.SUPPORTED_GYM_ENVS:
        try:
            Visualizer(env, env_params, states, jnp.array(returns)).animate(str(path))
        except Exception as error:  # gymnax raises various types for envs it cannot draw
            raise ConfigError(f"gymnax cannot render {env.name}: {error}") from None
        return
    import gymnasium

    renderer = gymnasium.make(env.name, render_mode="rgb_array")
    renderer.reset(seed=0)
    vis_gym.set_gym_params(renderer.unwrapped, env.name, env_params)
    images = []
    for env_state in states:
        renderer.unwrapped.state = vis_gym.get_gym_state(env_state, env.name)
        if env.name == "Pendulum-v1":  # the torque arrow
            renderer.unwrapped.last_u = np.asarray(env_state.last_u, np.float64)
        images.append(Image.fromarray(renderer.render()))
    renderer.close()
    save_gif(images, returns, path)


def save_gif(images: list, returns: list[float], path: Path) -> None:
    """Frames with the step and running return drawn on, as one GIF written atomically: frame
    k shows the state after k steps (frame 0 the reset) and the return of those k steps."""
    from PIL import ImageDraw

    for frame, (image, total) in enumerate(zip(images, returns, strict=True)):
        ImageDraw.Draw(image).text((8, 8), f"step {frame}  return {total:.1f}", fill="black")
    images = [image.quantize(colors=64, method=Image.Quantize.FASTOCTREE) for image in images]
    gif = io.BytesIO()
    images[0].save(gif, "GIF", save_all=True, append_images=images[1:], duration=50, loop=0)
    atomic_write(path, gif.getvalue())


def main(
    run_dir: Path,
    /,
    episodes: int = 16,
    gif: Path | None = None,
    gif_entry: int = 0,
    gif_steps: int | None = None,
    algorithm: Path | None = None,
) -> dict[str, Any]:
    """Evaluation of every seed (and sweep point) of a run's last checkpoint, as the run's
    `eval_policy` plays (greedy unless it asked for `sampled`).

    Args:
        run_dir: The run directory (holds config.json and checkpoint.eqx).
        episodes: Episodes per seed, each on a fresh environment.
        gif: Also render one episode to this GIF file.
        gif_entry: Which seed (index in the run, point-major in a sweep) to render.
        gif_steps: Draw at most this many steps of the episode (default: all of it).
        algorithm: The algorithm file that made the run, if it moved since (config.json
            records where it was).
    """
    if episodes < 1:
        raise ConfigError(f"--episodes must be positive, got {episodes}.")
    if gif_steps is not None and gif_steps < 1:
        raise ConfigError(f"--gif-steps must be positive, got {gif_steps}.")
    module, batch, configs, state, header = load_run(run_dir, episodes, algorithm)
    if not 0 <= gif_entry < batch.size:
        raise ConfigError(
            f"--gif-entry {gif_entry} is not an entry of this run (0..{batch.size - 1})."
        )

    def evaluate_one(cfg: Any, state: Any, key: jax.Array) -> dict[str, jax.Array]:
        return module.make_train(cfg).evaluate(state, key)

    # Fresh evaluation keys, apart from the ones training used.
    keys = jax.random.split(jax.random.key(batch.config.seed + 1_000_003), batch.size)
    metrics = jax.jit(jax.vmap(evaluate_one))(configs, state, keys)
    returns = np.asarray(metrics["episodic_return"])
    print(f"{run_dir}: checkpoint after interval {header['interval']}, {episodes} episodes each")
    for label, value in zip(batch.labels, returns, strict=True):
        print(f"  {label}: mean return {value:.2f}")
    entries = f"{batch.size} entr" + ("ies" if batch.size != 1 else "y")
    print(f"mean over entries {returns.mean():.2f} +- {returns.std():.2f} ({entries})")
    result = {
        "returns": returns.tolist(),
        "mean": float(returns.mean()),
        "std": float(returns.std()),
    }
    if gif is not None:
        seed = batch.config.seed
        total, length = render_gif(module, configs, state, gif_entry, gif, seed, gif_steps)
        print(f"wrote {gif}: entry {gif_entry}, return {total:.2f} over {length} steps")
    return result


if __name__ == "__main__":
    try:
        tyro.cli(main)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
