"""sbx's SAC / TD3 (SB3's JAX backend) on a MuJoCo task with canter's preset settings: returns.

The learning check beside `returns.py`: the same task, budget, settings and evaluation
(`num_eval_envs` deterministic episodes every `eval_every` env steps) run by an implementation
no one here wrote, one seed per process, so that a weak canter row can be told apart from a
hard setting. sbx gets what `benchmarks/speed/mujoco_peer.py` gives it (CleanRL's MuJoCo settings:
networks, batch, buffer, warm-up, learning rates, noise).

    python benchmarks/returns/peer_returns.py --algo td3 --env Hopper-v5 --seed 0 \\
        --total-timesteps 300000
    python benchmarks/returns/peer_returns.py --table-only   # rebuild peer_returns.md

Each run writes `results/peer_returns/sbx_<algo>__<env>__seed<k>.json` (the curve and the final
evaluation). The table sets sbx's seeds beside canter's for the same algorithm, env and budget,
gathered from every `results/returns*/` directory (`returns.py --out`, one per batch of seeds):
the final evaluation, the mean of the last five (one evaluation of four episodes swings
widely), and two tests of the difference in the latter: Welch's t-test (unequal variances) and
an exact permutation test (no assumption of normality, which four seeds cannot check).
"""

import argparse
import csv
import dataclasses
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from canter.common.run.files import atomic_write, write_json  # noqa: E402

from benchmarks import harness  # noqa: E402

RESULTS = harness.RESULTS
OUT = RESULTS / "peer_returns"


def run_sbx(algo: str, env_id: str, seed: int, total_timesteps: int) -> dict:
    """Train sbx's `algo` on `env_id` for `total_timesteps`, evaluating as canter's preset does."""
    import importlib

    import gymnasium
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    from benchmarks.speed.mujoco_peer import make_sbx

    module = importlib.import_module(f"canter.algorithms.{algo}")
    config = module.Config(**dict(module.PRESETS[env_id], total_timesteps=total_timesteps))
    if total_timesteps <= 0 or total_timesteps % config.eval_every:
        print(
            f"--total-timesteps {total_timesteps} must be a positive multiple of the preset's "
            f"eval_every ({config.eval_every}), so every step trained is evaluated and counted.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    model = make_sbx(algo, config, gymnasium.make(env_id), seed=seed)
    eval_env = Monitor(gymnasium.make(env_id))  # returns of whole episodes
    eval_env.reset(seed=10_000 + seed)
    curve, tic = [], time.perf_counter()
    for done in range(config.eval_every, total_timesteps + 1, config.eval_every):
        model.learn(total_timesteps=config.eval_every, reset_num_timesteps=False)
        returns, _ = evaluate_policy(
            model, eval_env, n_eval_episodes=config.num_eval_envs, return_episode_rewards=True
        )
        curve.append({"env_steps": done, "eval_return": float(np.mean(returns))})
        print(
            f"sbx {algo} {env_id} seed {seed}: {done} steps, return {curve[-1]['eval_return']:.1f}"
        )
    return {
        "library": "sbx",
        "algo": algo,
        "env": env_id,
        "seed": seed,
        "env_steps": total_timesteps,
        "settings": {k: v for k, v in dataclasses.asdict(config).items() if k != "env"},
        "final_eval_return": curve[-1]["eval_return"],
        "curve": curve,
        "run_s": time.perf_counter() - tic,
    }


# Config fields that may differ between a canter program and sbx's run of the same preset.
PER_RUN = {"seed", "num_seeds", "total_timesteps", "env"}


def preset_changes(config: dict, settings: dict) -> dict:
    """The fields, present in both, in which a canter program's config.json differs from the
    settings sbx was given (its seed and budget aside): a preset edited between the two runs.
    Fields the older side lacks were added later with defaults that kept every program."""
    shared = (set(config) & set(settings)) - PER_RUN
    return {k: (config[k], settings[k]) for k in sorted(shared) if config[k] != settings[k]}


def canter_curves(
    algo: str,
    env: str,
    steps: int,
    results: Path = RESULTS,
    folders: str = "returns*",
    settings: dict | None = None,
) -> dict[int, list]:
    """Evaluation curves per seed of every canter run of `algo` from the `env` preset at this
    budget, gathered over the `folders` result directories (`returns.py --out ...`, one per
    batch of seeds); runs that changed anything besides the budget and the seed are left out,
    and so are runs of an earlier version of the preset than `settings` (sbx's), said on
    stderr."""
    curves: dict[int, list] = {}
    for path in sorted(results.glob(f"{folders}/{algo}__{env}.json")):
        row = json.loads(path.read_text())
        changed = set(row.get("overrides", {})) - {"total_timesteps", "seed"}
        if row.get("preset") != env or changed or row["env_steps"] != steps:
            continue
        folder = path.parent / "runs" / f"{algo}__{env}"
        if settings is not None and (folder / "config.json").exists():
            edits = preset_changes(json.loads((folder / "config.json").read_text()), settings)
            if edits:
                said = ", ".join(f"{k} {a!r} where sbx ran {b!r}" for k, (a, b) in edits.items())
                print(f"left out {path}: an earlier {env} preset ({said})", file=sys.stderr)
                continue
        for log in sorted(folder.glob("seed_*/metrics.csv")):
            with log.open() as f:
                curve = [float(r["eval/episodic_return"]) for r in csv.DictReader(f)]
            curves[int(log.parent.name.removeprefix("seed_"))] = curve
    return curves


def permutation_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact permutation test of mean(a) - mean(b): the share of the ways to split
    the pooled values into groups of len(a) and len(b) whose difference is at least as large."""
    pooled, n = np.asarray(a + b), len(a)
    observed = abs(np.mean(a) - np.mean(b))
    diffs = [
        abs(pooled[list(split)].mean() - np.delete(pooled, list(split)).mean())
        for split in itertools.combinations(range(len(pooled)), n)
    ]
    return float(np.mean(np.asarray(diffs) >= observed - 1e-9))


def tail_means(curves: dict[int, list], seeds: list[int], last: int) -> list[float]:
    """Per seed, the mean of the `last` evaluations of its curve."""
    return [float(np.mean(curves[seed][-last:])) for seed in seeds]


def spread(values: list[float]) -> str:
    """`mean (value, value, ...)`, rounded for a table cell."""
    return f"{np.mean(values):,.0f} ({', '.join(f'{v:,.0f}' for v in values)})"


def table(out: Path = OUT, results: Path = RESULTS, last: int = 5) -> str:
    """Markdown: per (algo, env, budget), sbx's seeds beside canter's, final evaluation and the
    mean of the `last` evaluations (a single evaluation of a few episodes swings widely)."""
    groups: dict[tuple, dict[int, list]] = {}
    settings: dict[tuple, dict] = {}
    for path in sorted(out.glob("sbx_*.json")):
        result = json.loads(path.read_text())
        key = (result["algo"], result["env"], result["env_steps"])
        groups.setdefault(key, {})[result["seed"]] = [c["eval_return"] for c in result["curve"]]
        mine = {k: v for k, v in result.get("settings", {}).items() if k not in PER_RUN}
        if settings.setdefault(key, mine) != mine:
            raise SystemExit(f"{path}: sbx's seeds of {key} ran different settings")
    lines = [
        f"| algorithm | env | env steps | library | seeds | final return: mean (per seed) | "
        f"last {last} evaluations: mean (per seed) | canter - sbx, last {last}: Welch t (p), "
        "permutation p |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for (algo, env, steps), peer in sorted(groups.items()):
        mine = canter_curves(algo, env, steps, results, settings=settings[algo, env, steps])
        for library, curves in (("sbx", peer), ("canter", mine)):
            if not curves:
                lines.append(
                    f"| {algo} | {env} | {steps:,} | {library} | | no run at this budget | | |"
                )
                continue
            finals = [curves[seed][-1] for seed in sorted(curves)]
            tails = tail_means(curves, sorted(curves), last)
            test = ""
            if library == "canter" and peer:
                peer_tails = tail_means(peer, sorted(peer), last)
                gap, p = np.mean(tails) - np.mean(peer_tails), permutation_p(tails, peer_tails)
                t, welch_p = harness.welch(tails, peer_tails)
                welch = "" if t != t else f" t = {t:.2f} (p = {welch_p:.2f}),"
                test = f"{gap:+,.0f}:{welch} permutation p = {p:.2f}"
            seeds = ", ".join(str(seed) for seed in sorted(curves))
            lines.append(
                f"| {algo} | {env} | {steps:,} | {library} | {seeds} | {spread(finals)} | "
                f"{spread(tails)} | {test} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("sac", "td3"), default="td3")
    parser.add_argument("--env", default="Hopper-v5", help="a MuJoCo preset name, e.g. Hopper-v5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-timesteps", type=int, default=300_000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument(
        "--shared-machine",
        action="store_true",
        help="another job runs on the machine at the same time (returns are unaffected): the "
        "record marks its wall time as not comparable",
    )
    args = parser.parse_args()
    if not args.table_only:
        result = run_sbx(args.algo, args.env, args.seed, args.total_timesteps)
        result["run_s_alone"] = not args.shared_machine
        name = f"sbx_{args.algo}__{args.env}__seed{args.seed}.json"
        write_json(args.out / name, result)
    text = table(args.out)
    atomic_write(args.out / "peer_returns.md", text)
    print(text)


if __name__ == "__main__":
    main()
