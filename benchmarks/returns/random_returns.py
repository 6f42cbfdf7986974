"""The return of uniformly random valid actions: the baseline a learning result is set beside.

Discrete actions are drawn uniformly among the valid ones, continuous ones uniformly in the
action space's box.

For each env, `--episodes` fresh episodes (canter's evaluation loop, `run_episodes`, with a
policy that draws every action uniformly from the valid ones: `masking.random_action`, which
reads the env's action mask where it has one). Writes `<out>/random_returns.json` (kept across
runs, one entry per env) and `random_returns.md`; benchmarks/returns/returns.py shows the number
beside that env's rows.

    python benchmarks/returns/random_returns.py --envs jumanji:Knapsack-v1 \\
        xminigrid:MiniGrid-DoorKey-5x5
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

RESULTS = harness.RESULTS / "returns"


def random_return(env_name: str, episodes: int, seed: int = 0) -> dict:
    """Mean return and episode length of `episodes` episodes of uniformly random valid actions."""
    import jax
    import jax.numpy as jnp
    from canter.common.blocks.masking import random_action
    from canter.common.envs import action_kind, make_env
    from canter.common.envs.suites import JAXMARL_PREFIX
    from canter.common.run.evaluation import run_episodes

    # A team (JaxMARL) draws every agent's action from its own valid ones (masks [n, agents, k]).
    env, params = make_env(env_name, agents=env_name.startswith(JAXMARL_PREFIX))
    space = env.action_space(params)
    discrete = action_kind(env, params) == "discrete"

    def policy(obs: jax.Array, key: jax.Array, mask: jax.Array | None = None) -> tuple:
        key, draw = jax.random.split(key)
        if discrete:
            return random_action(draw, mask, obs.shape[0], int(space.n)), key
        shape = (obs.shape[0], *space.shape)  # uniform over the Box
        return jax.random.uniform(draw, shape, minval=space.low, maxval=space.high), key

    def run(key: jax.Array) -> jax.Array:
        policy_key, env_key = jax.random.split(key)
        returns = run_episodes(env, params, policy, policy_key, env_key, episodes)
        return returns["episodic_return"], returns["episodic_length"]

    mean, length = jax.jit(run)(jax.random.key(seed))
    return {
        "episodes": episodes,
        "mean_return": float(mean),
        "mean_length": float(jnp.asarray(length)),
    }


def table(record: dict) -> str:
    lines = [
        "| env | random valid actions: mean return | mean episode length | episodes |",
        "|---|---:|---:|---:|",
    ]
    for env, r in sorted(record["envs"].items()):
        lines.append(
            f"| {env} | {r['mean_return']:.3f} | {r['mean_length']:.1f} | {r['episodes']:,} |"
        )
    lines += ["", f"Machine: {record['machine']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="+", required=True)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    path = args.out / "random_returns.json"
    record = json.loads(path.read_text()) if path.exists() else {"envs": {}}
    for env in args.envs:
        record["envs"][env] = random_return(env, args.episodes)
        print(f"{env}: {record['envs'][env]}", flush=True)
    record["machine"] = harness.machine()
    harness.write(path, json.dumps(record, indent=1))
    harness.write(args.out / "random_returns.md", table(record))
    print(table(record))


if __name__ == "__main__":
    main()
