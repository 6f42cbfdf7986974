"""canter's SAC / TD3 against sbx (SB3's JAX backend) on a MuJoCo task: one measurement each.

Used by `python benchmarks/speed/speed_mujoco.py`, which runs every measurement in a fresh
process (compilation cache off) with the implementations taking turns. Both sides get CleanRL's
MuJoCo settings, canter's `--preset HalfCheetah-v5` with a shorter budget: 256x256 ReLU networks,
batch 256, buffer 1e6, one update per env step, Polyak 0.005, gamma 0.99, the same number of
uniform random warm-up steps (SAC 5,000, TD3 25,000); SAC: actor lr 3e-4, critics 1e-3,
automatic entropy from 0.2 towards -action_dim, actor every step; TD3: lr 3e-4, Gaussian
exploration noise 0.1, target noise 0.2 clipped at 0.5, actor and targets every 2nd update.
Differences left: sbx tunes SAC's temperature at the actor's rate (3e-4; canter: the critics',
1e-3) and initialises with Flax's defaults (canter: Equinox's, PyTorch's scheme, as CleanRL).
Each run ends with one deterministic evaluation of `EVAL_EPISODES` episodes, timed as part of
the run on both sides; compile time is reported apart (sbx compiles inside its first calls, so
its run time includes its compilation).

`measure_canter_updates` bounds canter from above: the same algorithm and networks with
gymnax's Pendulum-v1 (a pure JAX env, no host callback) in place of the MuJoCo task, updates
from the start. Its updates per second are what canter could reach on the task if the host
simulator, the warm-up and the evaluation cost nothing (Pendulum's 3-dim observations and 1-dim
actions also make its first and last layers smaller than HalfCheetah's 17 and 6).
"""

import dataclasses
import time

TASK = "HalfCheetah-v5"
EVAL_EPISODES = 4


def canter_config(algo: str, total_timesteps: int, num_seeds: int):
    import importlib

    module = importlib.import_module(f"canter.algorithms.{algo}")
    preset = dict(module.PRESETS[TASK], total_timesteps=total_timesteps)
    # One evaluation, at the end, as on the sbx side.
    preset.update(eval_every=total_timesteps, num_eval_envs=EVAL_EPISODES)
    return module, module.Config(**preset, num_seeds=num_seeds)


def measure_canter(algo: str, total_timesteps: int, num_seeds: int) -> dict:
    """What `python algorithms/<algo>.py --preset HalfCheetah-v5` runs, nothing written."""
    from canter.algorithms import trainer

    module, config = canter_config(algo, total_timesteps, num_seeds)
    summary = trainer.run(config, module.make_train, algo=algo, verbose=False).summary
    return {
        "compile_s": summary["compile_s"],
        "run_s": summary["run_s"],
        "final_returns": summary["eval_return"],
        "env_steps": num_seeds * summary["env_steps"],
    }


FREE_ENV, FREE_WARMUP = "Pendulum-v1", 1_000


def measure_canter_updates(algo: str, total_timesteps: int) -> dict:
    """canter's `algo` with the MuJoCo preset's networks and batch on gymnax's Pendulum-v1,
    `FREE_WARMUP` random steps, then one update per env step; `updates_per_s` counts updates."""
    from canter.algorithms import trainer

    module, config = canter_config(algo, total_timesteps, 1)
    config = dataclasses.replace(config, env=FREE_ENV, learning_starts=FREE_WARMUP, num_eval_envs=1)
    summary = trainer.run(config, module.make_train, algo=algo, verbose=False).summary
    return {
        "compile_s": summary["compile_s"],
        "run_s": summary["run_s"],
        "final_returns": summary["eval_return"],
        "env_steps": summary["env_steps"],
        "updates_per_s": (summary["env_steps"] - FREE_WARMUP) / summary["run_s"],
    }


def make_sbx(algo: str, config, env, seed: int = 0):
    """sbx's SAC or TD3 on the Gymnasium `env` with `config`'s (canter's preset) settings."""
    import numpy as np
    from sbx import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    common = dict(
        buffer_size=config.buffer_size,
        learning_starts=config.learning_starts,
        batch_size=config.batch_size,
        tau=config.tau,
        gamma=config.gamma,
        train_freq=1,
        gradient_steps=1,
        policy_kwargs=dict(net_arch=[config.hidden_size] * 2),
        seed=seed,
    )
    if algo == "sac":
        return SAC(
            "MlpPolicy",
            env,
            learning_rate=config.policy_lr,
            qf_learning_rate=config.q_lr,
            ent_coef=f"auto_{config.alpha}",
            policy_delay=1,
            **common,
        )
    dim = env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(dim), config.exploration_noise * np.ones(dim))
    return TD3(
        "MlpPolicy",
        env,
        learning_rate=config.learning_rate,
        action_noise=noise,
        policy_delay=config.policy_frequency,
        target_policy_noise=config.policy_noise,
        target_noise_clip=config.noise_clip,
        **common,
    )


def measure_sbx(algo: str, total_timesteps: int) -> dict:
    """sbx's `learn` on one Gymnasium env, then `EVAL_EPISODES` deterministic episodes."""
    import gymnasium
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy

    _, config = canter_config(algo, total_timesteps, 1)
    model = make_sbx(algo, config, gymnasium.make(TASK))
    tic = time.perf_counter()
    model.learn(total_timesteps=total_timesteps)
    returns, _ = evaluate_policy(
        model, gymnasium.make(TASK), n_eval_episodes=EVAL_EPISODES, return_episode_rewards=True
    )
    run_s = time.perf_counter() - tic
    return {
        "compile_s": float("nan"),
        "run_s": run_s,
        "final_returns": [float(np.mean(returns))],
        "env_steps": total_timesteps,
    }
