"""CleanRL's own ppo_atari.py on an Atari game, every finished game's training return saved.

The peer run beside `returns.py`'s ppo_atari row: CleanRL's code, unmodified, on the same game
(`BreakoutNoFrameskip-v4`, canter's `gymnasium:BreakoutNoFrameskip-v4`), budget and machine.
CleanRL's Atari files are written for Gymnasium 0.29 and ale-py 0.8 (their wrappers predate
Gymnasium 1.0), so CleanRL runs in a Python environment of its own, which this script drives:

    python3 -m venv clrl
    clrl/bin/pip install torch==2.13.0 gymnasium==0.29.1 ale-py==0.8.1 "shimmy[atari]==1.1.0" \\
        "numpy<2" tyro opencv-python-headless
    clrl/bin/ale-import-roms "$(python -c 'import ale_py, pathlib;
        print(pathlib.Path(ale_py.__file__).parent / "roms")')"   # ale-py 0.8 ships no ROMs
    git clone https://github.com/vwxyzjn/cleanrl CL
    git -C CL checkout fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
    python benchmarks/returns/atari_peer.py --cleanrl-dir CL --python clrl/bin/python --seed 0

These are CleanRL's own Atari pins (its pyproject's `atari` group: Gymnasium 0.29 finds ale-py
0.8's games through shimmy) but for torch: CleanRL pins 2.4.1, which has no wheel here, and
2.13.0 (the bench extra's) runs its code unchanged. The ROMs are those canter's ale-py (the
atari extra) ships, imported into ale-py 0.8 (CleanRL's AutoROM downloads them: no network here).

CleanRL logs each finished game (whole games of raw score: its RecordEpisodeStatistics sits below
the life-loss and reward-clipping wrappers, as canter's episode statistics do) through
TensorBoard's `SummaryWriter`. The child process (`--child`, stdlib only, inside CleanRL's
environment) stands a writer in for it that keeps those scalars as JSON lines, so nothing of
CleanRL is edited and no TensorBoard is needed; this process turns them into the reference
statistic, per CleanRL iteration of `num_envs x num_steps` env steps: the mean return of the
games that ended in it (None where none did), and its value at the last iteration in which a
game ended, as canter's "final train return" reads its own.

Writes `results/peer_returns/cleanrl_ppo_atari__<game>__seed<k>.json` (the command, each game's
step, return and length, the per-iteration statistic, the final value, the wall time), then
rebuilds `results/peer_returns/atari_peer.md`: CleanRL's seeds beside canter's ppo_atari seeds
on the same game and budget (`returns.py --algo ppo_atari`, from every `results/returns*/`),
the final statistic and its mean over the last five of canter's evaluation intervals, read at
the same env steps on both sides, with Welch's t-test of the latter.

    python benchmarks/returns/atari_peer.py --table-only   # rebuild atari_peer.md
"""

import argparse
import json
import runpy
import subprocess
import sys
import time
import types
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
OUT = RESULTS / "peer_returns"
COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
EPISODE_TAGS = ("charts/episodic_return", "charts/episodic_length")
LAST = 5  # evaluation intervals averaged for the test (one iteration's games swing widely)


def child(log: str, script: str, argv: list[str]) -> None:
    """Inside CleanRL's environment: run `script` as its command line would, its episode scalars
    written to `log` as JSON lines `[tag, value, step]` (the first line: the versions)."""
    import importlib.metadata as metadata

    out = open(log, "w")  # noqa: SIM115 (closed by the stand-in's close, as CleanRL calls it)
    versions = {}
    for name in ("gymnasium", "ale-py", "torch", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    out.write(json.dumps(versions) + "\n")

    class Writer:
        """Stands in for torch.utils.tensorboard.SummaryWriter: keeps the episode scalars."""

        def __init__(self, *args, **kwargs):
            pass

        def add_text(self, *args, **kwargs):
            pass

        def add_scalar(self, tag, value, step):
            if tag in EPISODE_TAGS:
                out.write(json.dumps([tag, float(value), int(step)]) + "\n")

        def close(self):
            out.close()

    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = Writer
    sys.modules["torch.utils.tensorboard"] = module
    sys.path.insert(0, str(Path(script).resolve().parents[1]))  # cleanrl_utils
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


def cleanrl_arguments(args: argparse.Namespace) -> list[str]:
    """CleanRL's own flags for this run (its tyro Args; the rest keep CleanRL's defaults, and
    these are CleanRL's defaults too unless changed here)."""
    return [
        f"--env-id={args.game}",
        f"--total-timesteps={args.total_timesteps}",
        f"--num-envs={args.num_envs}",
        f"--num-steps={args.num_steps}",
        f"--seed={args.seed}",
        "--no-cuda",
    ]


def games(lines: list[str]) -> list[dict]:
    """The logged games, in order: step (CleanRL's global step when it ended), return, length."""
    rows: dict[tuple[str, int], list[float]] = {}
    for line in lines:
        tag, value, step = json.loads(line)
        rows.setdefault((tag, step), []).append(value)
    ended = []
    for (tag, step), values in rows.items():
        if tag == "charts/episodic_return":
            lengths = rows.get(("charts/episodic_length", step), [])
            if len(lengths) != len(values):
                raise SystemExit(f"step {step}: {len(values)} returns, {len(lengths)} lengths")
            ended += [
                dict(step=step, ret=r, length=n) for r, n in zip(values, lengths, strict=True)
            ]
    return sorted(ended, key=lambda game: game["step"])


def per_iteration(ended: list[dict], iterations: int, batch: int) -> list[float | None]:
    """The mean return of the games that ended in each iteration of `batch` env steps (CleanRL
    counts `global_step` before the step: a game ending in iteration i logs a step in
    ((i - 1) * batch, i * batch]), None where none ended."""
    sums, counts = [0.0] * iterations, [0] * iterations
    for game in ended:
        i = (game["step"] - 1) // batch
        sums[i], counts[i] = sums[i] + game["ret"], counts[i] + 1
    return [s / c if c else None for s, c in zip(sums, counts, strict=True)]


def run(args: argparse.Namespace) -> dict:
    script = Path(args.cleanrl_dir).resolve() / "cleanrl" / "ppo_atari.py"
    if not script.is_file():
        raise SystemExit(f"{script} not found: --cleanrl-dir is a CleanRL checkout.")
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / f".cleanrl_{args.game}__seed{args.seed}.jsonl").resolve()
    argv = cleanrl_arguments(args)
    command = [args.python, str(Path(__file__).resolve()), "--child", str(log), str(script)]
    start = time.perf_counter()
    # CleanRL writes nothing but its run folder's name here (the stand-in keeps the scalars).
    subprocess.run(command + argv, check=True, cwd=args.out)
    wall_s = time.perf_counter() - start
    versions, *lines = log.read_text().splitlines()
    log.unlink()
    batch = args.num_envs * args.num_steps
    iterations = args.total_timesteps // batch
    ended = games(lines)
    statistic = per_iteration(ended, iterations, batch)
    finished = [value for value in statistic if value is not None]
    return {
        "peer": "CleanRL ppo_atari.py",
        "cleanrl_commit": args.cleanrl_commit,
        "command": f"python cleanrl/ppo_atari.py {' '.join(argv)}",
        "versions": json.loads(versions),
        "game": args.game,
        "seed": args.seed,
        "env_steps": iterations * batch,
        "iteration_env_steps": batch,
        "games": ended,
        "episode_return": statistic,
        "final_train_return": finished[-1] if finished else None,
        "wall_s": wall_s,
    }


def canter_seeds(results: Path, game: str, steps: int) -> dict[int, dict]:
    """canter's ppo_atari seeds on `game` at `steps` env steps, from every `returns*/` folder
    (`returns.py --algo ppo_atari [--out ...]`, default flags besides the budget, the seed and
    the evaluation's): per seed its interval curve (env steps, train return) from metrics.csv
    and its program's record (wall time: compile and run)."""
    import csv

    allowed = {"total_timesteps", "seed", "eval_every", "eval_policy", "eval_max_steps"}
    seeds = {}
    for path in sorted(results.glob("returns*/ppo_atari__*.json")):
        record = json.loads(path.read_text())
        if record["env"] != f"gymnasium:{game}" or record["env_steps"] != steps:
            continue
        if set(record.get("overrides", {})) - allowed:
            continue
        folder = path.parent / "runs" / path.stem  # returns.py's run folder for this record
        for log in sorted(folder.glob("seed_*/metrics.csv")):
            with log.open() as f:
                rows = list(csv.DictReader(f))
            curve = [(int(r["env_steps"]), float(r["train/episodic_return"])) for r in rows]
            seed = int(log.parent.name.removeprefix("seed_"))
            if seed in seeds:
                raise SystemExit(f"{game}: seed {seed} in {seeds[seed]['program']} and {path}")
            seeds[seed] = {"curve": curve, "program": str(path), "record": record}
    return seeds


def at_steps(statistic: list[float | None], batch: int, steps: list[int]) -> list[float]:
    """CleanRL's statistic read as canter's intervals read theirs: at each of `steps`, the value
    of the last iteration up to it in which a game ended (NaN where none had)."""
    values = []
    for end in steps:
        seen = [v for v in statistic[: end // batch] if v is not None]
        values.append(seen[-1] if seen else float("nan"))
    return values


def table(out: Path = OUT, results: Path = RESULTS) -> str:
    """Markdown: per game and budget, CleanRL's seeds and canter's, the final statistic and the
    mean of the last LAST interval points (CleanRL's read at canter's interval ends), with
    Welch's t-test of canter - CleanRL on the latter."""
    import numpy as np

    from benchmarks import harness

    lines = [
        "| game | env steps | library | seeds | final train return: mean (per seed) | "
        f"last {LAST} interval points: mean (per seed) | canter - CleanRL, last {LAST}: "
        "Welch t (p) | wall time, compile included (seeds per program) |",
        "|---|---:|---|---|---|---|---|---|",
    ]
    peers = [json.loads(p.read_text()) for p in sorted(out.glob("cleanrl_ppo_atari__*.json"))]
    for game, steps in sorted({(r["game"], r["env_steps"]) for r in peers}):
        same = [r for r in peers if (r["game"], r["env_steps"]) == (game, steps)]
        same.sort(key=lambda r: r["seed"])
        mine = canter_seeds(results, game, steps)
        grids = {tuple(s for s, _ in seed["curve"]) for seed in mine.values()}
        if len(grids) > 1:
            raise SystemExit(f"{game}: canter's seeds were evaluated at different steps")
        grid = list(grids.pop()) if grids else []
        peer_tails = [
            float(np.nanmean(at_steps(r["episode_return"], r["iteration_env_steps"], grid)[-LAST:]))
            if grid
            else None
            for r in same
        ]
        ones = " + ".join("1" for _ in same)  # CleanRL runs one seed per process
        peer_wall = f"{sum(r['wall_s'] for r in same) / 60:.0f} min ({ones})"
        seeds, finals = [r["seed"] for r in same], [r["final_train_return"] for r in same]
        lines.append(row(game, steps, "CleanRL", seeds, finals, peer_tails, "", peer_wall))
        if not mine:
            lines.append(f"| {game} | {steps:,} | canter | | no run at this budget | | | |")
            continue
        tails = [float(np.nanmean([v for _, v in mine[s]["curve"][-LAST:]])) for s in sorted(mine)]
        t, p = harness.welch(tails, peer_tails)
        test = f"{np.mean(tails) - np.mean(peer_tails):+.1f}"
        test += "" if t != t else f": t = {t:.2f} (p = {p:.2f})"
        programs = {seed["program"]: seed["record"] for seed in mine.values()}
        wall_s = sum(r["compile_s"] + r["run_s"] for r in programs.values())
        counts = " + ".join(str(r["num_seeds"]) for r in programs.values())
        finals = [mine[s]["curve"][-1][1] for s in sorted(mine)]
        wall = f"{wall_s / 60:.0f} min ({counts})"
        lines.append(row(game, steps, "canter", sorted(mine), finals, tails, test, wall))
    return "\n".join(lines) + "\n"


def row(game, steps, library, seeds, finals, tails, test, wall) -> str:
    """One line of the table: a library's seeds on a game at a budget."""
    return (
        f"| {game} | {steps:,} | {library} | {', '.join(map(str, seeds))} | {spread(finals)} | "
        f"{spread(tails)} | {test} | {wall} |"
    )


def spread(values: list[float | None]) -> str:
    """`mean (v, v, ...)`, None (no game ended) as `-`."""
    numbers = [v for v in values if v is not None]
    mean = sum(numbers) / len(numbers) if numbers else float("nan")
    return f"{mean:.1f} ({', '.join('-' if v is None else f'{v:.1f}' for v in values)})"


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl-dir", help="a CleanRL checkout (for a run)")
    parser.add_argument("--cleanrl-commit", default=COMMIT)
    parser.add_argument("--python", default="python", help="the Python of CleanRL's environment")
    parser.add_argument("--game", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--num-envs", type=int, default=8, help="CleanRL's default")
    parser.add_argument("--num-steps", type=int, default=128, help="CleanRL's default")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--results", type=Path, default=RESULTS, help="returns.py's --out root")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from canter.common.run.files import atomic_write, write_json

    if not args.table_only:
        if args.cleanrl_dir is None:
            parser.error("--cleanrl-dir is needed for a run (or --table-only)")
        record = run(args)
        path = args.out / f"cleanrl_ppo_atari__{args.game}__seed{args.seed}.json"
        write_json(path, record)
        print(f"{path}: final train return {record['final_train_return']}")
    text = table(args.out, args.results)
    atomic_write(args.out / "atari_peer.md", text)
    print(text)


if __name__ == "__main__":
    main()
