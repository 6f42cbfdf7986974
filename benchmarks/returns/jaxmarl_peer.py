"""JaxMARL's own IPPO on MPE simple_spread beside canter's ippo.py: returns and speed.

The peer run beside `returns.py`'s ippo row: JaxMARL's `baselines/IPPO/ippo_ff_mpe.py`,
unmodified, at its own configuration (`config/ippo_ff_mpe.yaml`) but canter's row's budget and
seed count, on the same machine; then canter's ippo.py at the same settings (its defaults are
that configuration), each side in a fresh process, in turn. JaxMARL's baselines are not in its
PyPI wheel: check the repository out at the commit ippo.py cites and pass it.

    git clone https://github.com/FLAIROx/JaxMARL JM
    git -C JM checkout c793d095618c6d3edfb5632802348f57b70a4b94
    pip install -e ".[jaxmarl,bench,log]"   # hydra-core and wandb: the script imports them
    python benchmarks/returns/jaxmarl_peer.py --jaxmarl-dir JM

JaxMARL's script builds `make_train(config)` from its yaml (hydra) and logs through wandb; this
script loads the file as it is, gives `make_train` the yaml's values with TOTAL_TIMESTEPS,
NUM_SEEDS and SEED overridden as hydra's command line would, starts wandb in the script's own
`disabled` mode, and jits and vmaps `make_train` over the seeds as its `main` does. Its training
statistic is the mean over the last update's steps and agents of `returned_episode_returns`,
which MPELogWrapper holds, from each episode's end to the next, as each agent's return times the
number of agents: averaged over agents, the team's summed return, weighted by the steps each
episode's value was held (so the episode that ended in the update before counts too). canter's
statistic is the plain mean over the episodes that ended in its last iteration: both estimate
the team's return at the end of training, from about five episodes an env.

Writes `results/peer_returns/jaxmarl_ippo_mpe.json` and `.md`: per side the final training
statistic per seed, the compile and run seconds, team steps per second (all seeds, run only),
and Welch's t-test of the difference.
"""

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import harness  # noqa: E402

OUT = harness.RESULTS / "peer_returns"
SCRIPT = Path("baselines/IPPO/ippo_ff_mpe.py")


def run_jaxmarl(jaxmarl_dir: Path, total_timesteps: int, seeds: int, seed: int) -> dict:
    """JaxMARL's IPPO, as its `main` runs it, at the given budget; its final statistics."""
    import jax
    import numpy as np
    import wandb
    from omegaconf import OmegaConf

    path = jaxmarl_dir / SCRIPT
    spec = importlib.util.spec_from_file_location("ippo_ff_mpe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = OmegaConf.to_container(OmegaConf.load(path.parent / "config" / "ippo_ff_mpe.yaml"))
    config |= {"TOTAL_TIMESTEPS": total_timesteps, "NUM_SEEDS": seeds, "SEED": seed}
    wandb.init(mode=config["WANDB_MODE"])
    rngs = jax.random.split(jax.random.PRNGKey(config["SEED"]), config["NUM_SEEDS"])
    start = time.perf_counter()
    train = jax.jit(jax.vmap(jax.jit(module.make_train(config)))).lower(rngs).compile()
    compiled = time.perf_counter()
    out = jax.block_until_ready(train(rngs))
    done = time.perf_counter()
    returns = np.asarray(out["metrics"]["returned_episode_returns"])  # [seeds, updates]
    steps = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
    return dict(
        side="JaxMARL ippo_ff_mpe.py",
        final=[float(r) for r in returns[:, -1]],
        env_steps=int(steps),
        compile_s=compiled - start,
        run_s=done - compiled,
    )


def run_canter(total_timesteps: int, seeds: int, seed: int) -> dict:
    """canter's ippo.py at its defaults (JaxMARL's configuration) and the same budget."""
    from canter.algorithms import ippo, trainer

    config = ippo.Config(total_timesteps=total_timesteps, num_seeds=seeds, seed=seed)
    config = dataclasses.replace(config, eval_every=config.total_timesteps)
    result = trainer.run(config, ippo.make_train, algo="ippo", verbose=False)
    finals = result.metrics["train"]["episodic_return"][:, -1]
    return dict(
        side="canter ippo.py",
        final=[float(r) for r in finals],
        env_steps=config.num_iterations * config.batch_size,
        compile_s=result.summary["compile_s"],
        run_s=result.summary["run_s"],
    )


def table(record: dict) -> str:
    lines = [
        "| side | team steps per seed | seeds | final training return per seed | mean | compile "
        "| run | team steps/s (all seeds) |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for side in record["sides"]:
        finals = side["final"]
        speed = side["env_steps"] * len(finals) / side["run_s"]
        lines.append(
            f"| {side['side']} | {side['env_steps']:,} | {len(finals)} | "
            f"{', '.join(f'{f:.1f}' for f in finals)} | {sum(finals) / len(finals):.1f} | "
            f"{side['compile_s']:.0f} s | {side['run_s']:.0f} s | {speed:,.0f} |"
        )
    canter, peer = (s["final"] for s in record["sides"])
    t, p = harness.welch(canter, peer)
    speeds = [s["env_steps"] * len(s["final"]) / s["run_s"] for s in record["sides"]]
    lines += [
        "",
        f"canter minus JaxMARL: {sum(canter) / len(canter) - sum(peer) / len(peer):+.1f} "
        f"(Welch t = {t:.2f}, p = {p:.2f}); canter's speed {speeds[0] / speeds[1]:.2f}x "
        f"JaxMARL's. Machine: {record['machine']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jaxmarl-dir", type=Path)
    parser.add_argument("--total-timesteps", type=int, default=1_024_000)
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--side", choices=("canter", "jaxmarl"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    budget = (args.total_timesteps, args.num_seeds, args.seed)
    if args.side:  # one side, in this fresh process: its record on stdout's last line
        side = (
            run_canter(*budget) if args.side == "canter" else run_jaxmarl(args.jaxmarl_dir, *budget)
        )
        print(json.dumps(side))
        return
    if args.jaxmarl_dir is None or not (args.jaxmarl_dir / SCRIPT).exists():
        raise SystemExit(f"--jaxmarl-dir must hold JaxMARL's {SCRIPT} (see --help)")
    sides = []
    for side in ("canter", "jaxmarl"):
        command = [sys.executable, __file__, "--side", side, "--jaxmarl-dir", str(args.jaxmarl_dir)]
        command += ["--total-timesteps", str(args.total_timesteps)]
        command += ["--num-seeds", str(args.num_seeds), "--seed", str(args.seed)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        sides.append(json.loads(done.stdout.strip().splitlines()[-1]))
    record = dict(sides=sides, machine=harness.machine(), script=str(SCRIPT))
    harness.write(args.out / "jaxmarl_ippo_mpe.json", json.dumps(record, indent=1))
    harness.write(args.out / "jaxmarl_ippo_mpe.md", table(record))
    print(table(record))


if __name__ == "__main__":
    main()
