"""canter's PPO against rejax's PPO on the same config, in fresh processes, taking turns.

Each measurement is one fresh Python process (the persistent compilation cache off, so every
compile is cold) running one implementation once to completion:
- `canter`: what `python algorithms/ppo.py` runs: the host runner, seeds sharded over the CPU
  devices (one per core, see common/run/devices.py), nothing written to disk;
- `canter-pure`: `jax.jit(jax.vmap(train))` of canter's pure `train(key)`, one device;
- `rejax`: `jax.jit(jax.vmap(algo.train))`, rejax's own way (rejax 0.1.3, PyPI).
Ratios are taken within a round (the three runs back to back), then the median is reported.
All get the same work:
PureJaxRL's CartPole config (4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed
linearly, tanh 64x64 actor and critic) for 512,000 env steps = 1000 iterations, with an
evaluation of 8 episodes every 50 iterations (rejax's default of 128 evaluation episodes is
overridden to match).

    pip install -e ".[bench]"
    python benchmarks/speed.py                       # the ratios of the README, 3 rounds
    python benchmarks/speed.py --scaling             # also env steps/s vs num_envs, num_seeds
    python benchmarks/speed.py --algo dqn            # DQN: PureJaxRL's CartPole config, 5e5 steps
    python benchmarks/speed.py --algo ppo-minatar    # PPO on Breakout-MinAtar, 1 and 8 seeds
    python benchmarks/speed.py --algo pqn-minatar    # PQN against the random-policy ceiling
    python benchmarks/speed.py --algo ppo-dp --seeds 1   # one seed's envs over 2 CPU devices
    python benchmarks/speed.py --algo ppo-minatar --one-core   # with the 2-core bound
    python benchmarks/speed.py --algo host           # host-env adapter vs a bare Gymnasium env
    python benchmarks/speed.py --algo mujoco         # SAC and TD3 vs sbx on HalfCheetah-v5
    python benchmarks/speed.py --algo mujoco --mujoco td3 --repeats 1   # TD3 only

For `--algo dqn` both sides run PureJaxRL's DQN CartPole config (10 envs, an update of 128 every 10
env steps, buffer 10,000 filled first, hard target copy every 500 env steps, epsilon 1 -> 0.05 over
half the run) with rejax's fixed 64x64 ReLU network, 8 evaluation episodes every 25,000 env steps;
results go to speed_dqn.md / speed_dqn.json. `--algo sac` and `--algo td3`: canter's CleanRL-style
defaults on Pendulum-v1 for 5e4 env steps on both sides (see `rejax_offpolicy_train`), results in
speed_sac.md / speed_td3.md. `--algo ppo-minatar`: both sides run gymnax-blines' MinAtar PPO
(canter's `--preset Breakout-MinAtar`: 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-4
constant, gamma 0.999, ReLU MLPs 2x256 on the flat grid) on Breakout-MinAtar for 20 iterations
(163,840 env steps per seed), 8 evaluation episodes at the end; results in speed_ppo-minatar.md.
`--algo pqn-minatar`: canter's PQN MinAtar preset (CNN, 128 envs x 32 steps) for 50 iterations
against random actions in the same 128 envs; results in speed_pqn-minatar.md. `--algo ppo-dp`:
PureJaxRL's CartPole PPO with 1024 envs x 16 steps for 100 iterations (1,638,400 env steps), one
seed: the CLI runner on one device, the CLI runner with `--data-parallel` (the seed's envs and
minibatches over the CPU devices, one per core), the CLI runner on one device pinned to one core
(`canter-1core`), and rejax; results in speed_ppo-dp.md. Half of `canter-1core`'s run time is what a
perfect split over two cores would take, so its ratio to rejax bounds every multi-device speed-up on
a 2-core machine; `--one-core` adds the same column (and bound) to the other PPO head-to-heads.
`--algo host` (the `mujoco` extra): random actions in HalfCheetah-v5 for 4,000 steps of 1 and 8
envs, through canter's adapter (`gymnasium:` env, one jitted scan, compile excluded) against
Gymnasium's own sync vector env stepped from Python; results in speed_host.md. `--algo mujoco` (the
`mujoco` and `bench` extras): canter's SAC and TD3 against sbx on HalfCheetah-v5 with CleanRL's
MuJoCo settings on both sides, 1e5 env steps, one seed, then canter's cost of 4 seeds against 1 at
3e4 steps (benchmarks/mujoco_peer.py says what each side runs), and a bound: canter's updates
alone (gymnax Pendulum-v1 in place of the simulator, same networks, 9,000 updates) give the
highest env steps/s canter could reach on the 1e5-step run with a free simulator and a free
warm-up; `--mujoco td3` measures one algorithm and keeps the other's rows. Results in
speed_mujoco.json and speed_mujoco.md.

Writes benchmarks/results/speed.json and speed.md (and scaling.json, scaling.md, scaling.png).
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ITERATIONS, EVAL_EVERY, EVAL_EPISODES = 1000, 50, 8
# The PPO settings both sides run: PureJaxRL's CartPole config, or gymnax-blines' MinAtar one.
SETUPS = {
    "ppo": dict(
        env="CartPole-v1", num_envs=4, num_steps=128, iterations=ITERATIONS, minibatches=4,
        learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, activation="tanh", hidden=64,
    ),
    # Issue 12's data-parallel check: one seed of 1024 envs x 16 steps (16,384 steps/iteration).
    "ppo-dp": dict(
        env="CartPole-v1", num_envs=1024, num_steps=16, iterations=100, minibatches=4,
        learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, activation="tanh", hidden=64,
    ),
    "ppo-minatar": dict(
        env="Breakout-MinAtar", num_envs=64, num_steps=128, iterations=20, minibatches=8,
        learning_rate=5e-4, anneal_lr=False, gamma=0.999, activation="relu", hidden=256,
    ),
}  # fmt: skip
PQN_MINATAR_ITERATIONS = 50


# --- one measurement (runs in a fresh process)


def canter_config(
    num_envs: int, num_steps: int, iterations: int, num_seeds: int = 1, algo: str = "ppo"
):
    from canter.algorithms import ppo

    setup = SETUPS[algo]
    return ppo.Config(
        env=setup["env"],
        num_seeds=num_seeds,
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=iterations * num_envs * num_steps,
        eval_every=min(EVAL_EVERY, iterations),
        num_eval_envs=EVAL_EPISODES,
        num_minibatches=setup["minibatches"],
        learning_rate=setup["learning_rate"],
        anneal_lr=setup["anneal_lr"],
        gamma=setup["gamma"],
        activation=setup["activation"],
        hidden_size=setup["hidden"],
    )


def canter_train(num_envs: int, num_steps: int, iterations: int, algo: str = "ppo"):
    from canter.algorithms import ppo

    train = ppo.make_train(canter_config(num_envs, num_steps, iterations, algo=algo))

    def final_return(outputs):
        _, metrics = outputs
        return metrics["eval"]["episodic_return"][:, -1]  # (seeds,)

    return train, final_return


def rejax_finish(algo, env):
    """rejax's `train` and its final-return reader, with canter's evaluation (EVAL_EPISODES
    episodes) and the env behind gymnax 1.0's adapter to the pre-1.0 step API rejax speaks
    (done = terminated or truncated). The adapter goes in after `create`, whose deepcopy
    recursed forever on it."""
    from gymnax.wrappers.compat import LegacyStepAPIWrapper
    from rejax.evaluate import evaluate

    class Legacy(LegacyStepAPIWrapper):
        def __deepcopy__(self, memo):
            return self

    def eval_callback(algo, ts, key):
        max_steps = algo.env_params.max_steps_in_episode
        return evaluate(algo.make_act(ts), key, algo.env, algo.env_params, EVAL_EPISODES, max_steps)

    def final_return(outputs):
        _, (_, returns) = outputs
        return returns[:, -1].mean(axis=-1)  # (seeds,)

    return algo.replace(env=Legacy(env), eval_callback=eval_callback).train, final_return


def rejax_train(num_envs: int, num_steps: int, iterations: int, algo: str = "ppo"):
    import gymnax
    import optax
    from rejax import PPO

    setup = SETUPS[algo]
    env, env_params = gymnax.make(setup["env"])
    eval_every = min(EVAL_EVERY, iterations)
    num_minibatches, epochs, rate = setup["minibatches"], 4, setup["learning_rate"]
    schedule = optax.linear_schedule(rate, 0.0, iterations * epochs * num_minibatches)
    created = PPO.create(
        env=env,
        env_params=env_params,
        num_envs=num_envs,
        num_steps=num_steps,
        num_epochs=epochs,
        num_minibatches=num_minibatches,
        learning_rate=schedule if setup["anneal_lr"] else rate,
        max_grad_norm=0.5,
        gamma=setup["gamma"],
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        total_timesteps=iterations * num_envs * num_steps,
        eval_freq=eval_every * num_envs * num_steps,
        skip_initial_evaluation=True,
        agent_kwargs={
            "activation": setup["activation"],
            "hidden_layer_sizes": (setup["hidden"],) * 2,
        },
    )

    return rejax_finish(created, env)


def canter_dqn_config(num_seeds: int = 1):
    from canter.algorithms import dqn

    # PureJaxRL's DQN CartPole config with rejax's fixed 64x64 network: 10 envs, one update of
    # 128 every 10 env steps, buffer 10,000 filled first, target copied every 500 env steps.
    return dqn.Config(num_seeds=num_seeds, hidden_sizes=(64, 64), num_eval_envs=EVAL_EPISODES)


def rejax_dqn_train(num_seeds: int):
    import gymnax
    from rejax import DQN

    config = canter_dqn_config()
    env, env_params = gymnax.make("CartPole-v1")
    algo = DQN.create(
        env=env,
        env_params=env_params,
        num_envs=config.num_envs,
        buffer_size=config.buffer_size,
        fill_buffer=config.learning_starts,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        gamma=config.gamma,
        eps_start=config.start_e,
        eps_end=config.end_e,
        exploration_fraction=config.exploration_fraction,
        target_update_freq=config.target_network_frequency,
        polyak=0.0,  # a hard copy, as in canter
        ddqn=False,
        num_epochs=1,  # one update per iteration of num_envs env steps
        total_timesteps=config.total_timesteps,
        eval_freq=config.eval_every * config.env_steps_per_iteration,
        skip_initial_evaluation=True,
        agent_kwargs={"activation": "relu"},
    )

    return rejax_finish(algo, env)


def canter_offpolicy_config(algo: str, num_seeds: int = 1):
    import importlib

    # CleanRL's SAC / TD3 settings (canter's defaults), Pendulum-v1, 5e4 env steps.
    module = importlib.import_module(f"canter.algorithms.{algo}")
    return module.Config(num_seeds=num_seeds, num_eval_envs=EVAL_EPISODES)


def rejax_offpolicy_train(algo: str):
    """rejax's SAC or TD3 on canter's config: 1 env, buffer 1e5 filled with 1,000 steps first,
    batch 128, an update per env step, Polyak 0.995, 64x64 ReLU networks (rejax has one
    learning rate: canter's actor rate, 3e-4, where canter's SAC uses 1e-3 for the critics)."""
    import gymnax
    from rejax import SAC, TD3

    config = canter_offpolicy_config(algo)
    env, env_params = gymnax.make(config.env)
    common = dict(
        env=env,
        env_params=env_params,
        num_envs=config.num_envs,
        buffer_size=config.buffer_size,
        fill_buffer=config.learning_starts,
        batch_size=config.batch_size,
        gamma=config.gamma,
        polyak=1.0 - config.tau,
        total_timesteps=config.total_timesteps,
        eval_freq=config.eval_every * config.num_envs,
        skip_initial_evaluation=True,
    )
    if algo == "sac":
        created = SAC.create(
            **common, learning_rate=config.policy_lr, agent_kwargs={"activation": "relu"}
        )
    else:
        created = TD3.create(
            **common,
            learning_rate=config.learning_rate,
            policy_delay=config.policy_frequency,
            exploration_noise=config.exploration_noise,
            target_noise=config.policy_noise,
            target_noise_clip=config.noise_clip,
            actor_kwargs={"activation": "relu"},
            critic_kwargs={"activation": "relu"},
        )

    return rejax_finish(created, env)


def random_policy(num_envs: int, num_steps: int, iterations: int, env_name: str = "CartPole-v1"):
    """Random actions in a gymnax env, `num_envs` wide: the environment's own ceiling."""
    import gymnax
    import jax
    import jax.numpy as jnp

    env, params = gymnax.make(env_name)
    num_actions = int(env.action_space(params).n)

    def train(key):
        reset_keys = jax.random.split(key, num_envs)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)

        def step(carry, key):
            state, total = carry
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            step_keys = jax.random.split(step_key, num_envs)
            obs, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                step_keys, state, actions, params
            )
            return (state, total + reward.sum()), None

        keys = jax.random.split(key, iterations * num_steps)
        (_, total), _ = jax.lax.scan(step, (state, jnp.float32(0)), keys)
        return total

    return train, lambda outputs: outputs * jnp.nan


def measure(
    impl: str, num_seeds: int, num_envs: int, num_steps: int, iterations: int, algo: str = "ppo"
) -> dict:
    """`canter`: what `python algorithms/ppo.py` runs (the host runner, seeds sharded over the
    CPU devices, no files written); `canter-pure`, `rejax`, `random`: `jit(vmap(train))`."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    if algo.endswith("-mujoco"):
        return measure_mujoco(impl, num_seeds, iterations, algo.removesuffix("-mujoco"))
    if algo == "host":
        return measure_host(impl, num_envs, num_steps)
    if impl in ("canter", "canter-dp", "canter-1core"):
        import importlib

        from canter.algorithms import trainer

        name = algo.removesuffix("-minatar").removesuffix("-dp")
        module = importlib.import_module(f"canter.algorithms.{name}")
        if algo == "dqn":
            config = canter_dqn_config(num_seeds)
        elif algo in ("sac", "td3"):
            config = canter_offpolicy_config(algo, num_seeds)
        elif algo == "pqn-minatar":
            config = pqn_minatar_config(num_seeds)
        else:
            config = canter_config(num_envs, num_steps, iterations, num_seeds, algo)
        dp = impl == "canter-dp"  # each seed's envs and minibatches over the devices
        summary = trainer.run(
            config, module.make_train, algo=name, verbose=False, data_parallel=dp
        ).summary
        compile_s, run_s, returns = summary["compile_s"], summary["run_s"], summary["eval_return"]
    else:
        if algo in ("dqn", "sac", "td3"):
            import importlib

            module = importlib.import_module(f"canter.algorithms.{algo}")
            config = canter_dqn_config() if algo == "dqn" else canter_offpolicy_config(algo)
            builds = {
                "canter-pure": lambda *_: (
                    module.make_train(config),
                    lambda outputs: outputs[1]["eval"]["episodic_return"][:, -1],
                ),
                "rejax": lambda *_: (
                    rejax_dqn_train(num_seeds) if algo == "dqn" else rejax_offpolicy_train(algo)
                ),
            }
        else:
            env_name = SETUPS.get(algo, {"env": "Breakout-MinAtar"})["env"]
            builds = {
                "canter-pure": lambda *sizes: canter_train(*sizes, algo=algo),
                "rejax": lambda *sizes: rejax_train(*sizes, algo=algo),
                "random": lambda *sizes: random_policy(*sizes, env_name=env_name),
            }
        train, final_return = builds[impl](num_envs, num_steps, iterations)
        keys = jax.random.split(jax.random.key(0), num_seeds)
        tic = time.perf_counter()
        compiled = jax.jit(jax.vmap(train)).lower(keys).compile()
        compile_s = time.perf_counter() - tic
        tic = time.perf_counter()
        outputs = jax.block_until_ready(compiled(keys))
        run_s = time.perf_counter() - tic
        returns = [float(r) for r in final_return(outputs)]
    env_steps = num_seeds * iterations * num_envs * num_steps
    if algo == "dqn":
        env_steps = num_seeds * canter_dqn_config().total_timesteps
    elif algo in ("sac", "td3"):
        env_steps = num_seeds * canter_offpolicy_config(algo).total_timesteps
    elif algo == "pqn-minatar" and impl == "canter":
        env_steps = num_seeds * pqn_minatar_config().total_timesteps
    return {
        "impl": impl,
        "algo": algo,
        "num_seeds": num_seeds,
        "num_envs": num_envs,
        "num_steps": num_steps,
        "iterations": iterations,
        "compile_s": compile_s,
        "run_s": run_s,
        "steps_per_s": env_steps / run_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_returns": [float(r) for r in returns],
    }


def measure_mujoco(impl: str, num_seeds: int, total_timesteps: int, algo: str) -> dict:
    """One run of canter's or sbx's SAC / TD3 on HalfCheetah-v5 (benchmarks/mujoco_peer.py), or
    (`canter-updates`) canter's updates alone, on gymnax's Pendulum-v1 with the same networks."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import mujoco_peer

    if impl == "sbx":
        out = mujoco_peer.measure_sbx(algo, total_timesteps)
    elif impl == "canter-updates":
        out = mujoco_peer.measure_canter_updates(algo, total_timesteps)
    else:
        out = mujoco_peer.measure_canter(algo, total_timesteps, num_seeds)
    _, preset = mujoco_peer.canter_config(algo, MUJOCO_STEPS, 1)
    return {
        **out,
        "impl": impl,
        "algo": algo,
        "num_seeds": num_seeds,
        "steps_per_s": out["env_steps"] / out["run_s"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "preset_learning_starts": preset.learning_starts,
    }


MUJOCO_STEPS, MUJOCO_SEED_STEPS = 100_000, 30_000  # TD3's 25,000 warm-up steps come first
MUJOCO_UPDATE_STEPS = 10_000  # canter-updates: 1,000 random steps, then 9,000 updates


def update_bound(free: dict, sbx_rates: list[float]) -> tuple[float, list[float]]:
    """canter's highest possible env steps/s on the MUJOCO_STEPS run, from its update rate
    alone (`free`, a canter-updates measurement): the preset's warm-up steps and the host
    simulator taken as free, one update per env step after the warm-up; and its ratio to sbx's
    env steps/s in each round."""
    updates = MUJOCO_STEPS - free["preset_learning_starts"]
    bound = MUJOCO_STEPS / (updates / free["updates_per_s"])
    return bound, [bound / rate for rate in sbx_rates]


def mujoco_rows(algo: str, repeats: int) -> list[str]:
    """Rounds of canter and sbx (fresh processes, in turn), canter's update-rate bound, then
    canter's 4 seeds against 1: the Markdown table rows of `algo`, with per-round ratios."""
    lines, rounds = [], []
    for repeat in range(repeats):
        rounds.append(
            {i: spawn(i, 1, 1, 1, MUJOCO_STEPS, f"{algo}-mujoco") for i in ("canter", "sbx")}
        )
        print(f"  {algo} round {repeat}: " + ", ".join(
            f"{i} {r['run_s']:.1f} s ({r['steps_per_s']:,.0f} steps/s, return "
            f"{r['final_returns'][0]:.0f})" for i, r in rounds[-1].items()
        ), flush=True)  # fmt: skip
    for field, label, fmt in (
        ("steps_per_s", "env steps/s", "{:,.0f}"),
        ("run_s", "run time (s)", "{:.1f}"),
        ("compile_s", "compile time (s)", "{:.1f}"),
        ("peak_rss_mb", "peak RSS (MiB)", "{:,.0f}"),
    ):
        cells = [statistics.median(r[i][field] for r in rounds) for i in ("canter", "sbx")]
        ratios = [r["canter"][field] / r["sbx"][field] for r in rounds]
        per_round = ", ".join(f"{x:.2f}" for x in ratios)
        ratio = f"{statistics.median(ratios):.2f} ({per_round})" if field != "compile_s" else ""
        lines.append(f"| {algo} | {label} | {fmt.format(cells[0])} | "
                     f"{fmt.format(cells[1])} | {ratio} |")  # fmt: skip
    returns = [mean([r[i]["final_returns"][0] for r in rounds]) for i in ("canter", "sbx")]
    lines.append(f"| {algo} | final eval return (mean over rounds) | {returns[0]:.0f} | "
                 f"{returns[1]:.0f} | |")  # fmt: skip
    free = spawn("canter-updates", 1, 1, 1, MUJOCO_UPDATE_STEPS, f"{algo}-mujoco")
    bound, ratios = update_bound(free, [r["sbx"]["steps_per_s"] for r in rounds])
    per_round = ", ".join(f"{x:.2f}" for x in ratios)
    lines.append(
        f"| {algo} | env steps/s bound: updates alone ({free['updates_per_s']:,.0f}/s on gymnax "
        f"Pendulum-v1), simulator and warm-up free | {bound:,.0f} | | "
        f"{statistics.median(ratios):.2f} ({per_round}) |"
    )
    print(lines[-1], flush=True)
    seeds = {n: spawn("canter", n, 1, 1, MUJOCO_SEED_STEPS, f"{algo}-mujoco") for n in (1, 4)}
    cost = seeds[4]["run_s"] / seeds[1]["run_s"]
    lines.append(
        f"| {algo} | 4 seeds / 1 seed, run time at {MUJOCO_SEED_STEPS:,} steps | "
        f"{cost:.2f}x ({seeds[1]['run_s']:.1f} s -> {seeds[4]['run_s']:.1f} s) | | |"
    )
    print(lines[-1], flush=True)
    return lines


MUJOCO_HEADER = [
    "| algorithm | measure | canter (CLI runner) | sbx | canter / sbx: median (per round) |",
    "|---|---|---:|---:|---|",
]


def mujoco_table(measured: dict) -> str:
    """speed_mujoco.md from speed_mujoco.json's entries (one per algorithm, each with its own
    rows, rounds and machine), so measuring one algorithm keeps the other's rows."""
    lines = MUJOCO_HEADER + [line for algo in sorted(measured) for line in measured[algo]["rows"]]
    notes = [
        f"- {algo}: {entry['repeats']} round(s), {entry['machine']}, {entry['date']}."
        for algo, entry in sorted(measured.items())
    ]
    return "\n".join([*lines, "", *notes])


HOST_ENV, HOST_STEPS, HOST_ENVS = "HalfCheetah-v5", 4_000, (1, 8)


def measure_host(impl: str, num_envs: int, steps: int) -> dict:
    """Random-action env steps/s of HOST_ENV: canter's adapter ("adapter": a jitted scan of
    vmapped steps, compile excluded) or a bare Gymnasium sync vector env ("bare")."""
    import jax

    tic = time.perf_counter()
    if impl == "adapter":
        from canter.common.envs import make_env

        env, params = make_env(f"gymnasium:{HOST_ENV}")
        space = env.action_space(params)
        reset = jax.vmap(env.reset, in_axes=(0, None))
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

        def rollout(key: jax.Array) -> jax.Array:
            obs, state = reset(jax.random.split(key, num_envs), params)

            def one(state: object, key: jax.Array) -> tuple:
                action = jax.random.uniform(key, (num_envs, *space.shape), minval=space.low,
                                            maxval=space.high)  # fmt: skip
                keys = jax.random.split(key, num_envs)
                _, state, reward, *_ = step(keys, state, action, params)
                return state, reward

            return jax.lax.scan(one, state, jax.random.split(key, steps))[1].sum()

        compiled = jax.jit(rollout).lower(jax.random.key(0)).compile()
        compile_s = time.perf_counter() - tic
        tic = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.key(0)))
    else:
        import gymnasium

        envs = gymnasium.make_vec(HOST_ENV, num_envs, vectorization_mode="sync")
        envs.reset(seed=0)
        envs.action_space.seed(0)
        compile_s = time.perf_counter() - tic
        tic = time.perf_counter()
        for _ in range(steps):
            envs.step(envs.action_space.sample())
    run_s = time.perf_counter() - tic
    return {"impl": impl, "num_envs": num_envs, "steps": steps, "run_s": run_s,
            "setup_s": compile_s, "steps_per_s": num_envs * steps / run_s}  # fmt: skip


def host_overhead(repeats: int) -> str:
    """canter's host-env adapter against the bare Gymnasium vector env, fresh processes in turn."""
    lines = [
        "| envs | adapter env steps/s | bare Gymnasium env steps/s "
        "| adapter / bare: median (per round) |",
        "|---:|---:|---:|---|",
    ]
    for num_envs in HOST_ENVS:
        rounds = []
        for repeat in range(repeats):
            pair = {i: spawn(i, 1, num_envs, HOST_STEPS, 1, "host") for i in ("adapter", "bare")}
            rounds.append(pair)
            print(f"  envs {num_envs} round {repeat}: " + ", ".join(
                f"{i} {r['steps_per_s']:,.0f} steps/s" for i, r in pair.items()
            ), flush=True)  # fmt: skip
        ratios = [r["adapter"]["steps_per_s"] / r["bare"]["steps_per_s"] for r in rounds]
        cells = [
            statistics.median(r[i]["steps_per_s"] for r in rounds) for i in ("adapter", "bare")
        ]
        per_round = ", ".join(f"{x:.2f}" for x in ratios)
        lines.append(f"| {num_envs} | {cells[0]:,.0f} | {cells[1]:,.0f} "
                     f"| {statistics.median(ratios):.2f} ({per_round}) |")  # fmt: skip
    return "\n".join(lines)


# --- the driver


def pqn_minatar_config(num_seeds: int = 1):
    from canter.algorithms import pqn

    preset = pqn.PRESETS["Breakout-MinAtar"]
    steps = PQN_MINATAR_ITERATIONS * 128 * 32
    return pqn.Config(**{
        **preset, "total_timesteps": steps, "num_seeds": num_seeds,
        "eval_every": PQN_MINATAR_ITERATIONS, "num_eval_envs": EVAL_EPISODES,
    })  # fmt: skip


def ceiling(repeats: int) -> str:
    """PQN's MinAtar preset against random actions in the same 128 Breakout envs, one seed."""
    rows = []
    for repeat in range(repeats):
        pair = {i: spawn(i, 1, 128, 32, PQN_MINATAR_ITERATIONS, "pqn-minatar") for i in IMPL_PAIR}
        rows.append(pair)
        print(f"  round {repeat}: " + ", ".join(
            f"{i} {r['steps_per_s']:,.0f} steps/s" for i, r in pair.items()
        ), flush=True)  # fmt: skip
    ratios = [r["canter"]["steps_per_s"] / r["random"]["steps_per_s"] for r in rows]
    lines = [
        "| measure | canter PQN (CLI runner) | random policy | PQN / random: median (per round) |",
        "|---|---:|---:|---|",
    ]
    for field, label, fmt in (("steps_per_s", "env steps/s", "{:,.0f}"),
                              ("compile_s", "compile time (s)", "{:.2f}")):  # fmt: skip
        cells = [fmt.format(statistics.median(r[i][field] for r in rows)) for i in IMPL_PAIR]
        ratio = "" if field != "steps_per_s" else (
            f"{statistics.median(ratios):.3f} ({', '.join(f'{x:.3f}' for x in ratios)})"
        )  # fmt: skip
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


IMPL_PAIR = ("canter", "random")


def spawn(
    impl: str, num_seeds: int, num_envs: int, num_steps: int, iterations: int, algo: str = "ppo"
) -> dict:
    args = [impl, str(num_seeds), str(num_envs), str(num_steps), str(iterations), algo]
    command = [sys.executable, __file__, "--worker", *args]
    env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"}
    if impl in ("rejax", "canter-1core"):  # JAX's default (canter's config is imported there)
        env["JAX_NUM_CPU_DEVICES"] = "1"
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mean(values: list[float]) -> float:
    finite = [v for v in values if v == v]
    return sum(finite) / len(finite) if finite else float("nan")


IMPLS = ("canter", "canter-pure", "rejax")


def head_to_head(
    repeats: int, seed_counts: list[int], algo: str = "ppo", one_core: bool = False
) -> dict:
    """Rounds of canter, canter-pure, rejax (fresh processes, in turn); medians, and per-round
    ratios against rejax measured in the same round. For `ppo-dp`, canter-pure is replaced
    by canter-dp (the CLI runner with --data-parallel) and canter-1core is added."""
    impls = impls_for(algo, one_core)
    out = {}
    for num_seeds in seed_counts:
        rounds = []
        for repeat in range(repeats):
            setup = SETUPS.get(algo, SETUPS["ppo"])
            sizes = (setup["num_envs"], setup["num_steps"], setup["iterations"])
            rounds.append({impl: spawn(impl, num_seeds, *sizes, algo) for impl in impls})
            times = ", ".join(
                f"{impl} {r['run_s']:.2f} s (compile {r['compile_s']:.2f})"
                for impl, r in rounds[-1].items()
            )
            print(f"  seeds {num_seeds} round {repeat}: {times}", flush=True)
        row = {"num_seeds": num_seeds, "rounds": rounds}
        for field in ("compile_s", "run_s", "steps_per_s", "peak_rss_mb"):
            row[field] = {impl: statistics.median(r[impl][field] for r in rounds) for impl in impls}
            row[f"{field}_ratios"] = {
                impl: [r[impl][field] / r["rejax"][field] for r in rounds] for impl in impls[:-1]
            }
        row["final_return"] = {
            impl: mean([x for r in rounds for x in r[impl]["final_returns"]]) for impl in impls
        }
        out[num_seeds] = row
    return out


LABELS = {"canter": "canter (CLI runner)", "canter-pure": "canter (pure jit)",
          "canter-dp": "canter (CLI, --data-parallel)",
          "canter-1core": "canter (CLI, 1 device pinned to 1 core)", "rejax": "rejax"}  # fmt: skip


def impls_for(algo: str, one_core: bool = False) -> tuple[str, ...]:
    """The implementations of a head-to-head, rejax last: ppo-dp sets --data-parallel beside the
    CLI. `canter-1core` (always with ppo-dp) is the CLI on one device pinned to one core: half
    its run time is what a perfect split over two cores could reach, the bound of any
    data-parallel or multi-device speed-up on a 2-core machine."""
    impls = ("canter", "canter-dp") if algo == "ppo-dp" else IMPLS[:2]
    return impls + (("canter-1core",) if one_core or algo == "ppo-dp" else ()) + ("rejax",)


def speed_table(rows: dict, algo: str = "ppo", one_core: bool = False) -> str:
    impls = impls_for(algo, one_core)
    short = {"canter": "CLI", "canter-pure": "pure", "canter-dp": "data-parallel",
             "canter-1core": "1 core"}  # fmt: skip
    ratios = [f"{short[i]} / rejax" for i in impls[:-1]]
    ratios[0] += ": median (per round)"
    lines = [
        f"| seeds | measure | {' | '.join(LABELS[i] for i in impls)} | {' | '.join(ratios)} |",
        "|---:|---|" + "---:|" * len(impls) + "---|" * len(ratios),
    ]
    for num_seeds, row in rows.items():
        for field, label, fmt in (
            ("run_s", "run time (s)", "{:.2f}"),
            ("compile_s", "compile time (s)", "{:.2f}"),
            ("steps_per_s", "env steps/s", "{:,.0f}"),
            ("peak_rss_mb", "peak RSS (MiB)", "{:,.0f}"),
        ):
            cells = " | ".join(fmt.format(row[field][impl]) for impl in impls)
            ratios = []
            for impl in impls[:-1]:
                median_ratio = statistics.median(row[f"{field}_ratios"][impl])
                per_round = ", ".join(f"{r:.2f}" for r in row[f"{field}_ratios"][impl])
                ratios.append(f"{median_ratio:.2f} ({per_round})")
            lines.append(f"| {num_seeds} | {label} | {cells} | {' | '.join(ratios)} |")
        returns = " | ".join(f"{row['final_return'][impl]:.1f}" for impl in impls)
        blanks = " |" * len(impls[:-1])
        lines.append(f"| {num_seeds} | final eval return (mean over runs) | {returns} |{blanks}")
    return "\n".join(lines)


def two_core_bound(row: dict) -> str:
    """The run time of a perfect split of the 1-core run over two cores, against rejax's."""
    per_round = [r["canter-1core"]["run_s"] / 2 / r["rejax"]["run_s"] for r in row["rounds"]]
    rounds = ", ".join(f"{x:.2f}" for x in per_round)
    return (
        f"- {row['num_seeds']} seed(s): a perfect split of the 1-core run over 2 cores would take "
        f"{statistics.median(per_round):.2f}x rejax's run time (per round: {rounds})."
    )


def scaling(iterations_budget: int, env_counts: list[int], seed_counts: list[int]) -> dict:
    """Env steps/s against num_envs (one seed) and num_seeds (4 envs), each impl once."""
    points = {"num_envs": [], "num_seeds": []}
    for num_envs in env_counts:
        num_steps = max(16, 512 // num_envs)
        iterations = max(10, iterations_budget // (num_envs * num_steps))
        for impl in ("canter", "rejax", "random"):
            point = spawn(impl, 1, num_envs, num_steps, iterations)
            points["num_envs"].append(point)
            print(f"  {impl} envs {num_envs}: {point['steps_per_s']:,.0f} steps/s", flush=True)
    for num_seeds in seed_counts:
        iterations = max(10, iterations_budget // 512)
        for impl in ("canter", "rejax"):
            point = spawn(impl, num_seeds, 4, 128, iterations)
            points["num_seeds"].append(point)
            print(f"  {impl} seeds {num_seeds}: {point['steps_per_s']:,.0f} steps/s", flush=True)
    return points


def scaling_table(points: dict) -> str:
    lines = ["| sweep | value | canter steps/s | rejax steps/s | random-policy steps/s |"]
    lines.append("|---|---:|---:|---:|---:|")
    for axis in ("num_envs", "num_seeds"):
        values = sorted({p[axis] for p in points[axis]})
        for value in values:
            by_impl = {p["impl"]: p["steps_per_s"] for p in points[axis] if p[axis] == value}
            cells = [f"{by_impl[i]:,.0f}" if i in by_impl else "" for i in ("canter", "rejax")]
            ceiling = f"{by_impl['random']:,.0f}" if "random" in by_impl else ""
            lines.append(f"| {axis} | {value} | {cells[0]} | {cells[1]} | {ceiling} |")
    return "\n".join(lines)


def scaling_plot(points: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, axis in zip(axes, ("num_envs", "num_seeds"), strict=True):
        for impl in ("canter", "rejax", "random"):
            series = sorted((p[axis], p["steps_per_s"]) for p in points[axis] if p["impl"] == impl)
            if series:
                xs, ys = zip(*series, strict=True)
                ax.plot(xs, ys, marker="o", label="random policy" if impl == "random" else impl)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis + (" (1 seed)" if axis == "num_envs" else " (4 envs each)"))
        ax.set_ylabel("env steps / s")
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(f"PPO CartPole-v1 throughput, {machine()}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def machine() -> str:
    import jax

    return f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), " + (
        f"jax {jax.__version__} on {jax.devices()[0].platform}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="A B pairs per seed count")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--scaling", action="store_true", help="also the throughput sweeps")
    parser.add_argument("--scaling-steps", type=int, default=131_072, help="env steps per point")
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 16, 64, 256, 1024])
    parser.add_argument("--scaling-seeds", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--one-core", action="store_true", help="also canter's CLI pinned to one core (the bound)"
    )
    parser.add_argument(
        "--algo",
        choices=[
            "ppo",
            "dqn",
            "sac",
            "td3",
            "ppo-minatar",
            "pqn-minatar",
            "ppo-dp",
            "host",
            "mujoco",
        ],
        default="ppo",
    )
    parser.add_argument(
        "--mujoco", nargs="+", choices=["sac", "td3"], default=["sac", "td3"],
        help="with --algo mujoco: the algorithms to measure (the others' rows are kept)",
    )  # fmt: skip
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        impl, *sizes, algo = args.worker
        if impl == "canter-1core":  # before JAX starts, so XLA sizes its threads for one core
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        print(json.dumps(measure(impl, *map(int, sizes), algo=algo)))
        return

    args.out.mkdir(parents=True, exist_ok=True)
    if args.algo == "mujoco":
        from canter.common.run.files import atomic_write

        print(f"{' and '.join(args.mujoco)} against sbx, HalfCheetah-v5, {machine()}", flush=True)
        path = args.out / "speed_mujoco.json"
        measured = json.loads(path.read_text()) if path.exists() else {}
        for algo in args.mujoco:
            rows = mujoco_rows(algo, args.repeats)
            date = time.strftime("%Y-%m-%d")
            measured[algo] = {"rows": rows, "repeats": args.repeats, "machine": machine(),
                              "date": date}  # fmt: skip
            atomic_write(path, json.dumps(measured, indent=1) + "\n")
            atomic_write(args.out / "speed_mujoco.md", mujoco_table(measured) + "\n")
        print(mujoco_table(measured))
        return
    if args.algo == "host":
        print(f"host-env adapter against bare Gymnasium, {HOST_ENV}, {machine()}", flush=True)
        table = host_overhead(args.repeats)
        (args.out / "speed_host.md").write_text(f"{table}\n\nMachine: {machine()}.\n")
        print(table)
        return
    if args.algo == "pqn-minatar":
        print(f"PQN against the random-policy ceiling, {machine()}", flush=True)
        table = ceiling(args.repeats)
        (args.out / "speed_pqn-minatar.md").write_text(f"{table}\n\nMachine: {machine()}.\n")
        print(table)
        return
    print(f"head to head, {machine()}", flush=True)
    rows = head_to_head(args.repeats, args.seeds, args.algo, args.one_core)
    table = speed_table(rows, args.algo, args.one_core)
    one = rows[args.seeds[0]]
    summary = [f"Machine: {machine()}.", ""]
    if "canter-1core" in impls_for(args.algo, args.one_core):
        summary += [two_core_bound(row) for row in rows.values()]
    if 1 in rows and 8 in rows:
        for impl in impls_for(args.algo, args.one_core):
            cost = rows[8]["run_s"][impl] / rows[1]["run_s"][impl]
            summary.append(f"- {impl}: 8 vmapped seeds cost {cost:.2f}x one seed (run time).")
    name = "speed" if args.algo == "ppo" else f"speed_{args.algo}"
    (args.out / f"{name}.json").write_text(
        json.dumps({"machine": machine(), "rows": rows}, indent=1)
    )
    (args.out / f"{name}.md").write_text("\n".join([table, "", *summary]) + "\n")
    print(table, *summary, sep="\n")
    for impl in impls_for(args.algo, args.one_core)[:-1]:
        print(
            f"seeds {one['num_seeds']}: {impl} / rejax, median of per-round ratios: run time "
            f"{statistics.median(one['run_s_ratios'][impl]):.2f}, compile time "
            f"{statistics.median(one['compile_s_ratios'][impl]):.2f}"
        )

    if args.scaling and args.algo == "ppo":
        print("scaling", flush=True)
        points = scaling(args.scaling_steps, args.envs, args.scaling_seeds)
        (args.out / "scaling.json").write_text(json.dumps(points, indent=1))
        (args.out / "scaling.md").write_text(scaling_table(points) + "\n")
        scaling_plot(points, args.out / "scaling.png")
        print(scaling_table(points))


if __name__ == "__main__":
    main()
