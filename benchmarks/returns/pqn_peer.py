"""purejaxql's own PQN on gymnax classic control: the peer run beside canter's PQN rows.

purejaxql (mttga/purejaxql, 47af6d7) is not on PyPI and needs jax <= 0.4.38 with gymnax
0.0.6, which canter's environment cannot hold, so this script runs in an environment of its
own and imports nothing from canter:

    git clone https://github.com/mttga/purejaxql PJQ && git -C PJQ checkout 47af6d7
    python3 -m venv pjq && pjq/bin/pip install "jax[cpu]==0.4.38" gymnax==0.0.6 six \\
        "numpy<2" flax==0.10.2 optax chex hydra-core omegaconf wandb safetensors
    pjq/bin/python benchmarks/returns/pqn_peer.py --pjq-dir PJQ --env CartPole-v1 --num-seeds 8

It reads purejaxql's own `config/config.yaml` and `config/alg/pqn_cartpole.yaml` (its
classic-control config; Acrobot-v1 by `ENV_NAME`, as its comment says), builds its
`make_train`, and runs `jax.jit(jax.vmap(train))` over `--num-seeds` keys split from `SEED`, as
its `single_run` does, with wandb off. purejaxql's test (greedy, 128 envs for one episode
length, every 5% of the updates: at 5e5 env steps the last at update 240 of 244) is the return
it reports: the mean over the test episodes that ended. Writes
`results/peer_returns/pjq_pqn__<env>.json`: the final test return per seed, the test curve, and
the training statistic purejaxql logs (the mean of every env's last finished episode,
`returned_episode_returns`, unmasked).

Then rebuilds `results/peer_returns/pqn_peer.md`: purejaxql's seeds beside canter's PQN row of
the same env (`returns.py --algo pqn --envs CartPole-v1 --num-seeds 8`, its greedy final
evaluation), with Welch's t-test of the difference. `--table-only` rebuilds it alone (any
Python with NumPy and SciPy: canter's environment too).
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "results" / "peer_returns"
RETURNS = Path(__file__).resolve().parents[1] / "results" / "returns"
COMMIT = "47af6d7b35c89ddfe633aaf7341bdb8964cb7cce"


def pjq_config(pjq_dir: Path, env: str, num_seeds: int, total_timesteps: float | None) -> dict:
    """purejaxql's config as its `single_run` sees it: config.yaml with the alg's merged in."""
    from omegaconf import OmegaConf

    root = pjq_dir / "purejaxql" / "config"
    base = OmegaConf.to_container(OmegaConf.load(root / "config.yaml"))
    base["alg"] = OmegaConf.to_container(OmegaConf.load(root / "alg" / "pqn_cartpole.yaml"))
    config = {**base, **base["alg"]}
    config.update(ENV_NAME=env, NUM_SEEDS=num_seeds, WANDB_MODE="disabled", SAVE_PATH=None)
    if total_timesteps is not None:
        config.update(TOTAL_TIMESTEPS=total_timesteps, TOTAL_TIMESTEPS_DECAY=total_timesteps)
    return config


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        f.write(text)
    os.replace(f.name, path)


def write(path: Path, record: dict) -> None:
    write_text(path, json.dumps(record, indent=2) + "\n")


def table(out: Path = OUT, returns: Path = RETURNS) -> str:
    """Markdown: per env, purejaxql's final test returns beside canter's PQN row."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.harness import mean, welch

    lines = [
        "| env | library | env steps | seeds | final greedy return: mean (per seed) | "
        "canter - purejaxql: Welch t (p) |",
        "|---|---|---:|---:|---|---|",
    ]
    for path in sorted(out.glob("pjq_pqn__*.json")):
        peer = json.loads(path.read_text())
        env = peer["env"]
        rows = [("purejaxql", peer["env_steps"], peer["final_test_returns"])]
        mine = returns / f"pqn__{env}.json"
        if mine.exists():
            record = json.loads(mine.read_text())
            rows.append(("canter", record["env_steps"], record["final_eval_returns"]))
        for library, steps, finals in rows:
            test = ""
            if library == "canter":
                t, p = welch(finals, peer["final_test_returns"])
                gap = mean(finals) - mean(peer["final_test_returns"])
                test = f"{gap:+.1f}" + ("" if t != t else f": t = {t:.2f} (p = {p:.2f})")
            values = ", ".join(f"{v:.1f}" for v in finals)
            lines.append(
                f"| {env} | {library} | {steps:,} | {len(finals)} | {mean(finals):.1f} "
                f"({values}) | {test} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pjq-dir", type=Path, help="a purejaxql checkout (for a run)")
    parser.add_argument("--env", choices=["CartPole-v1", "Acrobot-v1"], default="CartPole-v1")
    parser.add_argument("--num-seeds", type=int, default=8)  # as canter's PQN rows
    parser.add_argument("--total-timesteps", type=float, help="default: the config's 5e5")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--returns", type=Path, default=RETURNS, help="returns.py's --out")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if not args.table_only:
        if args.pjq_dir is None:
            parser.error("--pjq-dir is needed for a run (or --table-only)")
        run(args)
    text = table(args.out, args.returns)
    write_text(args.out / "pqn_peer.md", text)
    print(text)


def run(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(args.pjq_dir.resolve()))
    import jax
    import numpy as np
    from purejaxql.pqn_gymnax import make_train

    config = pjq_config(args.pjq_dir, args.env, args.num_seeds, args.total_timesteps)
    rngs = jax.random.split(jax.random.PRNGKey(config["SEED"]), args.num_seeds)
    start = time.perf_counter()
    outs = jax.block_until_ready(jax.jit(jax.vmap(make_train(config)))(rngs))
    wall_s = time.perf_counter() - start
    metrics = jax.tree_util.tree_map(np.asarray, outs["metrics"])  # [seeds, updates]
    test = metrics["test/returned_episode_returns"]
    record = {
        "peer": "purejaxql pqn_gymnax.py (config/alg/pqn_cartpole.yaml)",
        "commit": COMMIT,
        "env": args.env,
        "num_seeds": args.num_seeds,
        "env_steps": int(metrics["env_step"][0, -1]),
        "final_test_returns": test[:, -1].tolist(),
        "test_curve_mean": test.mean(axis=0).tolist(),
        "final_train_returns_unmasked": metrics["returned_episode_returns"][:, -1].tolist(),
        "jax": jax.__version__,
        "wall_s": wall_s,
    }
    path = args.out / f"pjq_pqn__{args.env}.json"
    write(path, record)
    print(f"{path}: final test returns {record['final_test_returns']}")


if __name__ == "__main__":
    main()
