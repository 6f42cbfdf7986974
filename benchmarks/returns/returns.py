"""Returns of one algorithm over gymnax environments, N vmapped seeds each, against references.

Each (algorithm, env) run goes through the host runner (`trainer.run`) into
`<out>/runs/<algo>__<env>/` (config, per-seed CSVs, summary.json, learning_curve.png), and its
result into `<out>/<algo>__<env>.json`. The markdown table `<out>/returns.md` is then rebuilt
from every JSON result in `<out>`, so runs of several algorithms add up to one table;
docs/results.md renders it (`python benchmarks/render_docs.py`). Results kept from a preset
since changed (`<algo>__<env>__before-<issue>.json`) go to `<out>/returns_earlier.md` instead,
shown in docs/notes/earlier-presets.md; the figures of docs/results.md are drawn from the same
results by benchmarks/returns/figures.py.

    python benchmarks/returns/returns.py --algo ppo --envs CartPole-v1 Acrobot-v1 --num-seeds 8
    python benchmarks/returns/returns.py --algo sac --envs Pendulum-v1 --num-seeds 8 \\
        --set total_timesteps=20000
    python benchmarks/returns/returns.py --algo ppo --presets --envs Breakout-MinAtar --num-seeds 4
    python benchmarks/returns/returns.py --table-only   # rebuild returns.md from the JSON results

`--presets` starts each env from the algorithm's preset of that name (`--preset ENV` on the
command line: MinAtar's reference configs); `--set` overrides on top.

The "final" return is the last evaluation of each seed (`num_eval_envs` episodes of the
config's `eval_policy`, greedy unless a preset or flag says `sampled`); the
IQM is the mean of the middle 50% of seeds, with a 95% percentile-bootstrap interval.
"""

import argparse
import ast
import dataclasses
import importlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

RESULTS = harness.RESULTS / "returns"
# The training return a record's "final train return" reads: the mean return of the episodes
# that ended in the run's last iteration with an episode end (algorithms/trainer.py,
# `interval_metrics`), averaged over seeds. Records without it were measured before issue 43,
# as the last finished episode of each env averaged over envs and over the last interval:
# the table marks them.
TRAIN_STATISTIC = "episodes ended in the last iteration"
# A result kept from a preset that has since changed is renamed `<algo>__<env>__before-<issue>`
# (its JSON and its run directory): the returns table shows the current presets' rows, and
# returns_earlier.md the earlier ones (docs/notes/earlier-presets.md).
EARLIER = "__before-"

# Published returns and the budget they were reached at: gymnax-blines' PPO checkpoints
# (docs/design.md, "Reference returns"; their logs read at 3f029d6) for every algorithm on
# classic control. gymnax's README lists Pendulum's -130 and MountainCarContinuous's 92 under
# "PPO, ES": both are its ES checkpoints' (-130.16 at 3.96e7 env steps, 95.34 at 8.94e8), so
# those two rows take the PPO checkpoints' own final logged returns. On MinAtar, the number of
# the reference the algorithm's preset follows, where one was published (gymnax-blines PPO,
# MLP, 1e7 steps, no Seaquest; purejaxql's PQN and the MinAtar paper's DQN give curves only).
GYMNAX_BLINES = {  # env: (return, env steps, whose)
    "CartPole-v1": (500.0, 150_000, "gymnax-blines PPO"),
    "Acrobot-v1": (-80.0, 500_000, "gymnax-blines PPO"),
    "Pendulum-v1": (-200.6, 991_968, "gymnax-blines PPO checkpoint; gymnax's -130 is ES at 3.96e7"),
    "MountainCar-v0": (-118.0, 250_000, "gymnax-blines PPO"),
    "MountainCarContinuous-v0": (
        -0.11,
        223_968,
        "gymnax-blines PPO checkpoint; gymnax's 92 is ES at 8.9e8",
    ),
}
# gymnax-blines' MinAtar PPO: one seed, the sampled policy's mean over 164 test episodes (its
# utils/ppo.py); Breakout's 28 is the README's, from a 2022 checkpoint (the current logs 22.9).
MINATAR_PPO = {"Asterix": 15.0, "Breakout": 28.0, "Freeway": 58.0, "SpaceInvaders": 131.0}
# CleanRL's published final returns, training episodic returns over at least 3 seeds (the
# JMLR 2022 appendix and the docs: SAC on MuJoCo v2, TD3 as re-run on v4 in td3.md; Atari's
# NoFrameskip-v4 without sticky actions, 1e7 steps): the nearest published numbers for canter's
# MuJoCo v5 presets and ppo_atari, their budget and version marked.
CLEANRL = {
    ("sac", "HalfCheetah-v5"): (10310.37, 1_000_000, "HalfCheetah-v2"),
    ("sac", "Hopper-v5"): (2685.76, 1_000_000, "Hopper-v2"),
    ("sac", "Walker2d-v5"): (4418.15, 1_000_000, "Walker2d-v2"),
    ("td3", "HalfCheetah-v5"): (9583.22, 1_000_000, "HalfCheetah-v4"),
    ("td3", "Hopper-v5"): (3134.61, 1_000_000, "Hopper-v4"),
    ("td3", "Walker2d-v5"): (4057.59, 1_000_000, "Walker2d-v4"),
    ("ppo_atari", "ALE/Breakout-v5"): (416.31, 10_000_000, "BreakoutNoFrameskip-v4"),
    ("ppo_atari", "ALE/Pong-v5"): (20.59, 10_000_000, "PongNoFrameskip-v4"),
    ("ppo_atari", "BreakoutNoFrameskip-v4"): (416.31, 10_000_000, "BreakoutNoFrameskip-v4"),
    ("ppo_atari", "PongNoFrameskip-v4"): (20.59, 10_000_000, "PongNoFrameskip-v4"),
}
# The classic-control numbers the new discrete files' own references publish, preferred to
# gymnax-blines' PPO for them: CleanRL's c51.py (docs/rl-algorithms/c51.md, training episodic
# return, 3 seeds, the defaults' 5e5 steps) and rl-baselines3-zoo's QR-DQN (benchmark.md at
# 22e3ff2: one trained agent's greedy evaluation at its tuned budget).
OWN_CLASSIC = {
    ("c51", "CartPole-v1"): (481.20, 500_000, "CleanRL c51.py, training return"),
    ("c51", "Acrobot-v1"): (-87.70, 500_000, "CleanRL c51.py, training return"),
    ("qr_dqn", "CartPole-v1"): (500.0, 50_000, "rl-baselines3-zoo QR-DQN, 1 agent, greedy"),
    ("qr_dqn", "Acrobot-v1"): (-69.14, 100_000, "rl-baselines3-zoo QR-DQN, 1 agent, greedy"),
}
# Craftax: the README's score is the return as a percentage of the maximum (226 points in
# Craftax, 22 in Classic: one per achievement, weighted); its table at 1e6 env steps,
# Craftax-Symbolic: PPO 2.2%, PPO-RNN 2.3%, RND 2.2% (Craftax_Baselines' settings).
CRAFTAX_MAX = {"craftax:Craftax-Symbolic-v1": 226.0, "craftax:Craftax-Classic-Symbolic-v1": 22.0}
CRAFTAX_PUBLISHED = {
    ("ppo", "craftax:Craftax-Symbolic-v1"): (2.2, 1_000_000, "Craftax README, PPO"),
    ("ppo_rnn", "craftax:Craftax-Symbolic-v1"): (2.3, 1_000_000, "Craftax README, PPO-RNN"),
    ("ppo_rnd", "craftax:Craftax-Symbolic-v1"): (2.2, 1_000_000, "Craftax README, RND"),
}
# MuJoCo Playground's DM Control results are curves (its technical report, arXiv 2502.08844):
# these are the final points of its PPO and SAC mean curves as read off the figures by a third
# party (docs/notes/playground-reference.md, section 3; not checked against the report), at the
# budgets its configs ask for: PPO 6e7 env steps (1e8 for PPO_LONGER), SAC 5e6 (1e7 for
# SAC_LONGER). Each row shows the random return beside them.
PLAYGROUND_READ = {  # task: (PPO, SAC)
    "AcrobotSwingup": (220, 50),
    "AcrobotSwingupSparse": (10, 0),
    "BallInCup": (560, 970),
    "CartpoleBalance": (1000, 1000),
    "CartpoleBalanceSparse": (1000, 1000),
    "CartpoleSwingup": (680, 860),
    "CartpoleSwingupSparse": (180, 800),
    "CheetahRun": (900, 920),
    "FingerSpin": (560, 920),
    "FingerTurnEasy": (970, 950),
    "FingerTurnHard": (960, 820),
    "FishSwim": (630, 500),
    "HopperHop": (140, 150),
    "HopperStand": (200, 220),
    "HumanoidRun": (160, 230),
    "HumanoidStand": (780, 900),
    "HumanoidWalk": (450, 900),
    "PendulumSwingup": (70, 80),
    "PointMass": (900, 900),
    "ReacherEasy": (980, 960),
    "ReacherHard": (980, 960),
    "SwimmerSwimmer6": (580, 450),
    "WalkerRun": (600, 730),
    "WalkerStand": (980, 970),
    "WalkerWalk": (970, 970),
}
PPO_LONGER = {"AcrobotSwingup", "AcrobotSwingupSparse", "SwimmerSwimmer6", "WalkerRun"}
SAC_LONGER = PPO_LONGER | {"FingerSpin", "FingerTurnEasy", "FingerTurnHard", "HopperHop"}
SAC_LONGER |= {"HopperStand", "CheetahRun", "HumanoidWalk"}
# Published without a number to read off (curves only): said in the table all the same.
CURVES_ONLY = {"pqn": "purejaxql PQN: curves only", "dqn": "Young & Tian 2019 DQN: curves only"}
# Other published figures a row is set beside, in words (a different measure or network).
# Jumanji's Knapsack-v1 bounds, measured on its own instance distribution.
KNAPSACK_BOUNDS = RESULTS.parent / "knapsack_bounds.json"
ALSO = {
    ("ppo", "SpaceInvaders-MinAtar"): "training return about 170 at 10,000,000 "
    "(PureJaxRL MinAtar notebook, MLP 2x64)",
}


def reference(algo: str, env: str) -> tuple[float | None, int | None, str]:
    """(published return, its env steps, whose) for `algo` on `env`, or Nones and a remark."""
    if (algo, env) in OWN_CLASSIC:
        return OWN_CLASSIC[algo, env]
    if env in GYMNAX_BLINES:
        return GYMNAX_BLINES[env]
    if (algo, env.removeprefix("gymnasium:")) in CLEANRL:
        published, budget, task = CLEANRL[algo, env.removeprefix("gymnasium:")]
        return published, budget, f"CleanRL {algo}, {task}, training return"
    game = env.removesuffix("-MinAtar")
    if algo == "ppo" and game in MINATAR_PPO:
        return MINATAR_PPO[game], 10_000_000, "gymnax-blines PPO, 1 seed, sampled policy"
    if env.endswith("-MinAtar") and algo in CURVES_ONLY:
        return None, None, CURVES_ONLY[algo]
    task = env.removeprefix("playground:")
    random = random_return(env) or random_return(f"playground:{task}")
    random = f"random valid actions: {random:.2f}" if random is not None else ""
    if task in PLAYGROUND_READ and algo in ("ppo_continuous", "sac"):
        sac = algo == "sac"
        usual, longer = (5_000_000, 10_000_000) if sac else (60_000_000, 100_000_000)
        budget = longer if task in (SAC_LONGER if sac else PPO_LONGER) else usual
        whose = f"Playground report, {'SAC' if sac else 'PPO'}, figure read second-hand"
        return PLAYGROUND_READ[task][sac], budget, "; ".join(filter(None, (whose, random)))
    return None, None, random


def random_return(env: str) -> float | None:
    """The mean return of random valid actions in `env`, where benchmarks/returns/random_returns.py
    measured it."""
    randoms = RESULTS / "random_returns.json"
    known = json.loads(randoms.read_text())["envs"] if randoms.exists() else {}
    return known[env]["mean_return"] if env in known else None


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the values between the 25th and 75th percentiles."""
    ordered = np.sort(values)
    cut = int(np.floor(0.25 * len(ordered)))
    middle = ordered[cut : len(ordered) - cut] if len(ordered) > 2 * cut else ordered
    return float(np.mean(middle))


def parse_overrides(config_cls: type, pairs: list[str]) -> dict:
    """`["total_timesteps=20000", "learning_rate=1e-3"]` -> typed values for Config fields."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    defaults = config_cls()
    overrides = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if name not in fields or not text:
            valid = ", ".join(fields)
            raise SystemExit(f"--set {pair}: expected FIELD=VALUE with FIELD one of: {valid}")
        kind = type(getattr(defaults, name))
        if kind is bool:
            overrides[name] = text.lower() in ("1", "true", "yes")
        elif getattr(defaults, name) is None:  # an optional field: a number, else the text
            try:
                overrides[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                overrides[name] = text
        else:
            overrides[name] = kind(text)
    return overrides


def run_part(module, algo: str, config, run_dir: Path, resume: bool) -> dict:
    """One program's run into `run_dir`, its summary. With `resume`, a finished run is read
    back and a run cut short continues from its last checkpoint; otherwise it starts afresh."""
    from canter.algorithms import trainer
    from canter.common.run.rundir import RunDir, config_record

    done = RunDir(run_dir).summary
    if resume and done.exists() and json.loads(done.read_text()).get("complete"):
        # A finished part is read back only if it ran this very config (the runner adds its
        # source and any extension to the record): a row never mixes two configurations.
        saved = RunDir(run_dir).read_config()
        wanted = config_record(algo, config, {})
        fields = sorted(
            k
            for k in wanted.keys() | saved.keys()
            if k not in ("source", "extended") and wanted.get(k) != saved.get(k)
        )
        if fields:
            diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {wanted.get(k)!r}" for k in fields)
            raise SystemExit(f"--resume {run_dir}: its finished run has another config ({diffs})")
        return json.loads(done.read_text())
    # A rerun replaces the previous result; `resume` continues a run that was cut short (a long
    # benchmark spread over several sittings) from its last checkpoint.
    resume = resume and RunDir(run_dir).checkpoint.exists()
    if not resume:
        shutil.rmtree(run_dir, ignore_errors=True)
    result = trainer.run(
        config, module.make_train, algo=algo, run_dir=run_dir, resume=resume, verbose=False
    )
    if not result.summary["complete"]:
        stopped = result.summary["stopped"]
        raise SystemExit(f"{run_dir} stopped early ({stopped}): rerun with --resume")
    return result.summary


def combined_curve(run_dir: Path, parts: list[Path], config, title: str) -> Path:
    """One learning curve over the seeds of every part of a run trained in turn (each part's
    run directory plots only its own seeds), written to `run_dir/learning_curve.png`."""
    import csv

    from canter.common.run.batch import make_batch
    from canter.common.run.report import plot_learning_curves

    logs = [log for part in parts for log in sorted(part.glob("seed_*/metrics.csv"))]
    rows = [list(csv.DictReader(log.read_text().splitlines())) for log in logs]
    steps = [int(row["env_steps"]) for row in rows[0]]
    metrics = {
        group: {
            "episodic_return": np.array(
                [[float(r[f"{group}/episodic_return"]) for r in seed] for seed in rows]
            )
        }
        for group in ("train", "eval")
    }
    path = run_dir / "learning_curve.png"
    plot_learning_curves(path, make_batch(config), steps, metrics, title)
    return path


def run_one(
    algo: str,
    env: str,
    num_seeds: int,
    overrides: dict,
    out: Path,
    preset: bool = False,
    resume: bool = False,
    label: str | None = None,
    seeds_per_program: int | None = None,
) -> dict:
    from canter.common.run.rundir import RunDir

    module = importlib.import_module(f"canter.algorithms.{algo}")
    base = module.PRESETS[env] if preset else {}
    # A preset names its env in full (MuJoCo's `gymnasium:HalfCheetah-v5` under `HalfCheetah-v5`).
    env_id = base.get("env", env)
    config = module.Config(**{**base, **overrides, "env": env_id, "num_seeds": num_seeds})
    run_dir = out / "runs" / f"{algo}__{slug(env)}"
    per = seeds_per_program or num_seeds
    if per >= num_seeds:
        summary = run_part(module, algo, config, run_dir, resume)
        curve = RunDir(run_dir).curve
    else:  # seeds in turn, `per` to a program (one seed's result does not depend on the rest)
        if not resume:
            shutil.rmtree(run_dir, ignore_errors=True)
        parts, part_dirs = [], []
        for first in range(0, num_seeds, per):
            count = min(per, num_seeds - first)
            part = dataclasses.replace(config, seed=config.seed + first, num_seeds=count)
            last = config.seed + first + count - 1
            part_dirs.append(run_dir / f"seeds_{part.seed}-{last}")
            parts.append(run_part(module, algo, part, part_dirs[-1], resume))
        summary = {
            "env_steps": parts[0]["env_steps"],
            "eval_return": [r for p in parts for r in p["eval_return"]],
            "final_return": [r for p in parts for r in p["final_return"]],
            "final_return_mean": float(np.nanmean([r for p in parts for r in p["final_return"]])),
            "compile_s": sum(p["compile_s"] for p in parts),
            "run_s": sum(p["run_s"] for p in parts),
        }
        title = f"{algo} on {env_id} ({num_seeds} seeds, {per} per program)"
        curve = combined_curve(run_dir, part_dirs, config, title)
    finals = np.asarray(summary["eval_return"], float)
    published, budget, source = reference(algo, env)
    record = {
        "algo": algo,
        "env": env,
        "num_seeds": num_seeds,
        "seeds_per_program": per,
        "env_steps": summary["env_steps"],
        "overrides": overrides,
        "preset": env if preset else None,
        "label": label,
        "sticky_action_prob": getattr(config, "sticky_action_prob", None),
        "final_eval_returns": finals.tolist(),
        "mean": float(finals.mean()),
        "std": float(finals.std()),
        "iqm": iqm(finals),
        "iqm_ci95": harness.bootstrap_ci(finals, iqm),
        "final_train_returns": summary["final_return"],
        "final_train_return_mean": summary["final_return_mean"],
        "train_statistic": TRAIN_STATISTIC,
        "reference": published,
        "reference_budget": budget,
        "reference_source": source,
        "compile_s": summary["compile_s"],
        "run_s": summary["run_s"],
        "curve": os.path.relpath(curve, harness.ROOT),
        "machine": harness.machine(),
    }
    harness.write(out / f"{algo}__{slug(env)}.json", json.dumps(record, indent=1))
    return record


def slug(env: str) -> str:
    """`env` as one file name: `gymnasium:ALE/Breakout-v5` -> `ALE-Breakout-v5`,
    `jumanji:Knapsack-v1` -> `jumanji-Knapsack-v1`."""
    return env.removeprefix("gymnasium:").replace("/", "-").replace(":", "-")


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def old_mark(record: dict) -> str:
    """` (old)` where a record's train return is the statistic from before issue 43."""
    return "" if record.get("train_statistic") == TRAIN_STATISTIC else " (old)"


def records(out: Path, earlier: bool = False) -> list[dict]:
    """The JSON results in `out` by algorithm and env: the current presets' rows, or with
    `earlier` those kept from a preset since changed (renamed `<algo>__<env>__before-<issue>`
    when it changed, its run directory likewise)."""
    paths = [p for p in sorted(out.glob("*__*.json")) if (EARLIER in p.stem) == earlier]
    found = [json.loads(p.read_text()) for p in paths]
    return sorted(found, key=lambda r: (r["algo"], r["env"]))


def machine(record: dict) -> str:
    """Where a row ran, in short: `2-core CPU`, `NVIDIA H100 80GB HBM3`."""
    where = record.get("machine", "")
    if "CPU cores" in where:
        return f"{where.split()[0]}-core CPU"
    return where.removeprefix("1 ").split(" (")[0]


def wall(record: dict) -> str:
    """The whole run's time and the machine it ran on: `14 min (2-core CPU)`."""
    return f"{duration(record['run_s'])} ({machine(record)})"


def published(r: dict) -> str:
    """The reference cell of a row: the published number and its budget, or what stands in for
    one (Craftax's score, the random policy's return, Knapsack's bounds)."""
    value, budget, source = reference(r["algo"], r["env"])  # the current list
    ref = f"{value:g} at {budget:,} ({source})" if value is not None else source
    game = r["env"] if r["env"].startswith("craftax:") else f"craftax:{r['env']}"
    if game in CRAFTAX_MAX:  # the score as Craftax's README gives it: of the training
        # return (the sampled policy), which is what Craftax_Baselines reports; greedy play
        # on Craftax can fall below random actions (docs/notes/issue-25-design.md). A
        # preset's row names its game without the prefix.
        score = 100 * r["final_train_return_mean"] / CRAFTAX_MAX[game]
        ref = f"score {score:.1f}% of the maximum (final train return{old_mark(r)})"
        if (r["algo"], game) in CRAFTAX_PUBLISHED:
            score, at, whose = CRAFTAX_PUBLISHED[r["algo"], game]
            ref += f"; published {score:g}% at {at:,} ({whose})"
        if (random := random_return(game)) is not None:
            ref += f"; random valid actions: {random:.2f} ({random / CRAFTAX_MAX[game]:.1%})"
    if (r["algo"], r["env"]) in ALSO:
        ref += f"; {ALSO[r['algo'], r['env']]}"
    if r["env"] == "jumanji:Knapsack-v1" and KNAPSACK_BOUNDS.exists():
        bounds = json.loads(KNAPSACK_BOUNDS.read_text())
        ref += (
            f"; no published agent return (Jumanji's are curves); optimum "
            f"{bounds['optimum_mean']:.2f}, value-per-weight greedy {bounds['greedy_mean']:.2f}"
            f" (benchmarks/returns/knapsack_bounds.py, {bounds['instances']:,} instances)"
        )
    return ref


def table(out: Path, earlier: bool = False) -> str:
    """The returns table of `out`'s JSON results: the current presets' rows, or the earlier."""
    from canter.common.run import cli  # each override as the flag that sets it

    lines = [
        "| algorithm | env | flags | env steps | seeds | final eval return mean +- std "
        "| IQM [95% CI] | final train return | wall time (machine) | published at env steps |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records(out, earlier):
        low, high = r["iqm_ci95"]
        flags = [f"--preset {r['preset']}"] if r.get("preset") else []
        flags += [f"[{r['label']}]"] if r.get("label") else []
        flags += [cli.flag(k, v) for k, v in r["overrides"].items()]
        if r["env"].endswith("-MinAtar") and r.get("sticky_action_prob") is not None:
            flags.append(f"(sticky {r['sticky_action_prob']:g})")
        lines.append(
            f"| {r['algo']} | {r['env']} | {' '.join(flags) or 'defaults'} | {r['env_steps']:,} "
            f"| {r['num_seeds']} | {r['mean']:.1f} +- {r['std']:.1f} | {r['iqm']:.1f} "
            f"[{low:.1f}, {high:.1f}] | {r['final_train_return_mean']:.1f}{old_mark(r)} "
            f"| {wall(r)} | {published(r)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo", help="a module in algorithms/, e.g. ppo, sac")
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"])
    parser.add_argument("--num-seeds", type=int, default=8)
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--presets", action="store_true", help="start from PRESETS[env]")
    parser.add_argument(
        "--label", help="shown beside the preset in the table, e.g. which revision of it ran"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument(
        "--seeds-per-program",
        type=int,
        help="train the seeds in turn, this many to a compiled program (memory: Craftax's "
        "PPO preset peaks near 8 GB per seed on the CPU); default: all in one",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue each env's run in OUT/runs from its last checkpoint, if it has one",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        module = importlib.import_module(f"canter.algorithms.{args.algo}")
        overrides = parse_overrides(module.Config, args.set)
        for env in args.envs:
            record = run_one(
                args.algo,
                env,
                args.num_seeds,
                overrides,
                args.out,
                args.presets,
                args.resume,
                args.label,
                args.seeds_per_program,
            )
            low, high = record["iqm_ci95"]
            print(
                f"{args.algo} {env}: {record['mean']:.1f} +- {record['std']:.1f}, IQM "
                f"{record['iqm']:.1f} [{low:.1f}, {high:.1f}] over {args.num_seeds} seeds "
                f"({record['env_steps']:,} env steps; curve {record['curve']})",
                flush=True,
            )
    text = table(args.out)
    harness.write(args.out / "returns.md", text + "\n")
    if records(args.out, earlier=True):  # shown in docs/notes/earlier-presets.md
        harness.write(args.out / "returns_earlier.md", table(args.out, earlier=True) + "\n")
    print(text)


if __name__ == "__main__":
    main()
