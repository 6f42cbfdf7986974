"""Craftax_Baselines' own PPO, PPO-RNN or PPO-RND on Craftax, its per-update statistic saved.

The peer run beside `returns.py`'s Craftax rows: the reference's code, unmodified, at the same
budget and settings, on the same machine, so that canter's row compares like with like.
Craftax_Baselines (CB) is not on PyPI: check it out at the commit its presets cite and pass it.

    git clone https://github.com/MichaelTMatthews/Craftax_Baselines CB
    git -C CB checkout 7ce36fa05b84a2c9e758012f1e6da402e1e3a891
    pip install -e ".[craftax,bench]"   # flax, wandb and orbax: CB imports them at the top
    python benchmarks/returns/craftax_peer.py --cb-dir CB --script ppo --seed 0

The defaults are the Craftax paper's 1M configuration that canter's `--preset
Craftax-Symbolic-v1` follows (256 envs x 16 steps, 1e6 env steps; algorithms/ppo.py), at the
learning rate of canter's preset for the script: 3e-4 for ppo and ppo_rnn, CB's default 2e-4 for
ppo_rnd (its RND 1M sweep sets none; algorithms/ppo_rnd.py). `ppo_rnd.py` takes the same flags
and logs the same statistic as `ppo.py`; its RND settings stay at CB's defaults, as the preset's.
CB reports its statistic through wandb only (ppo.py L582-592: the mean return of the episodes
that ended in each update, NaN dropped, `logz/batch_logging.py`). This script runs CB's
`run_ppo` as CB's command line would, with `wandb` replaced by a stand-in that keeps every
logged dict instead of sending it: nothing of CB is edited, and nothing leaves the machine.

Writes `results/peer_returns/cb_<script>__<env>__seed<k>.json`: the command, the per-update
returns (None where no episode ended), the final statistic (that of the last update in which an
episode ended, as canter's row reads it) and its score as % of the maximum, and the wall time
(compile included). Then rebuilds `results/peer_returns/craftax_peer.md`: per env with a run,
CB's seeds beside canter's finished programs of the same preset and budget (`returns.py --algo
ppo --presets --envs Craftax-Symbolic-v1`, one program or one per `--seeds-per-program` part, so
a run spread over several sittings shows the seeds it has), with Welch's t-test of the
difference once both sides have two seeds; canter's pqn_rnn and ppo_trxl rows of the same
presets follow, with no peer run (their references publish no 1M run).

    python benchmarks/returns/craftax_peer.py --table-only   # rebuild craftax_peer.md
"""

import argparse
import json
import runpy
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from canter.common.run.files import atomic_write, write_json  # noqa: E402

from benchmarks import harness  # noqa: E402
from benchmarks.returns.returns import CRAFTAX_PUBLISHED, duration  # noqa: E402

OUT = harness.RESULTS / "peer_returns"
RETURNS = harness.RESULTS / "returns"
MAXIMUM = {"Craftax-Symbolic-v1": 226.0, "Craftax-Classic-Symbolic-v1": 22.0}
SCRIPTS = {"ppo": "ppo", "ppo_rnn": "ppo_rnn", "ppo_rnd": "ppo_rnd"}  # canter's file: CB's script
LEARNING_RATE = {"ppo": 3e-4, "ppo_rnn": 3e-4, "ppo_rnd": 2e-4}  # canter's 1M presets
# canter's other Craftax 1M presets, whose references (purejaxql's PQN-RNN, TransformerXL_PPO_JAX)
# have no 1M run to set beside them: their rows stand beside PPO's and PPO-RNN's in the table.
CANTER_ONLY = ("pqn_rnn", "ppo_trxl")


def stand_in_wandb(logged: list[dict]) -> types.ModuleType:
    """A `wandb` module whose `log` appends to `logged` and whose `init` does nothing."""
    module = types.ModuleType("wandb")
    module.init = lambda *args, **kwargs: None
    module.log = lambda data, *args, **kwargs: logged.append(dict(data))
    module.run = None
    return module


def cb_arguments(args: argparse.Namespace) -> list[str]:
    """CB's own flags for this run (its argparse; everything not named keeps CB's default); the
    learning rate, unless given, canter's preset's for the script."""
    lr = LEARNING_RATE[args.script] if args.lr is None else args.lr
    return [
        f"--env_name={args.env}",
        f"--total_timesteps={args.total_timesteps}",
        f"--num_envs={args.num_envs}",
        f"--num_steps={args.num_steps}",
        f"--lr={lr}",
        f"--seed={args.seed}",
        "--use_wandb",  # logging on: CB's callback hands each update's statistic to `wandb.log`
        "--debug",
    ]


def run(args: argparse.Namespace) -> dict:
    cb_dir = Path(args.cb_dir).resolve()
    script = cb_dir / f"{args.script}.py"
    if not script.is_file():
        raise SystemExit(f"{script} not found: --cb-dir is a Craftax_Baselines checkout.")
    logged: list[dict] = []
    sys.modules["wandb"] = stand_in_wandb(logged)
    sys.path.insert(0, str(cb_dir))
    argv = cb_arguments(args)
    sys.argv = [str(script), *argv]
    start = time.perf_counter()
    runpy.run_path(str(script), run_name="__main__")
    # CB's run_ppo neither blocks on its result nor saves it by default: wait until every
    # update's callback has reported, or the clock and the count stop early.
    import jax

    jax.effects_barrier()
    wall_s = time.perf_counter() - start
    updates = args.total_timesteps // (args.num_envs * args.num_steps)
    if len(logged) != updates:
        raise SystemExit(f"CB logged {len(logged)} updates, expected {updates}.")
    returns = [row.get("episode_return") for row in logged]
    returns = [None if r is None else float(r) for r in returns]
    ended = [r for r in returns if r is not None]
    final = ended[-1] if ended else None
    maximum = MAXIMUM[args.env]
    return {
        "peer": f"Craftax_Baselines {args.script}.py",
        "cb_commit": args.cb_commit,
        "command": f"python {args.script}.py {' '.join(argv)}",
        "env": args.env,
        "seed": args.seed,
        "env_steps": updates * args.num_envs * args.num_steps,
        "updates": updates,
        "episode_return": returns,
        "final_train_return": final,
        "score_percent": None if final is None else 100 * final / maximum,
        "wall_s": wall_s,
    }


def canter_parts(returns: Path, algo: str, env: str) -> list[dict]:
    """The finished programs of returns.py's preset run of `algo` on `env`, in seed order: one
    per `--seeds-per-program` part where the run has parts, else its one summary. A part cut
    short is left out; a seed found in two parts (the leftovers of another split) is refused."""
    folder = returns / "runs" / f"{algo}__{env}"
    parts = sorted(
        folder.glob("seeds_*/summary.json"), key=lambda p: int(p.parent.name[6:].split("-")[0])
    )
    paths = parts or [folder / "summary.json"]
    summaries = [json.loads(p.read_text()) for p in paths if p.exists()]
    finished = [summary for summary in summaries if summary.get("complete")]
    seeds = [seed for summary in finished for seed in summary["seeds"]]
    if len(seeds) != len(set(seeds)):
        raise SystemExit(f"{folder}: seeds {seeds} repeat across its parts; rerun the row")
    return finished


def cell(values: list[float | None], digits: int = 2) -> str:
    """`mean (v, v, ...)` over the values that are numbers; None (no episode ended) is `-`."""
    each = ", ".join("-" if v is None else f"{v:.{digits}f}" for v in values)
    return f"{harness.mean([v for v in values if v is not None]):.{digits}f} ({each})"


def entries(out: Path, returns: Path, env: str, algo: str) -> list[dict]:
    """CB's seeds and canter's programs of `algo` on `env`, one dict per library and budget."""
    rows = []
    pattern = f"cb_{SCRIPTS[algo]}__{env}__seed*.json" if algo in SCRIPTS else None
    peers = [json.loads(p.read_text()) for p in out.glob(pattern)] if pattern else []
    for steps in sorted({record["env_steps"] for record in peers}):
        same = sorted((r for r in peers if r["env_steps"] == steps), key=lambda r: r["seed"])
        rows.append(
            dict(
                library="Craftax_Baselines",
                steps=steps,
                seeds=[r["seed"] for r in same],
                finals=[r["final_train_return"] for r in same],
                wall_s=sum(r["wall_s"] for r in same),
                programs=" + ".join("1" for _ in same),
            )
        )
    parts = canter_parts(returns, algo, env)
    for steps in sorted({part["env_steps"] for part in parts}):
        same = [part for part in parts if part["env_steps"] == steps]
        rows.append(
            dict(
                library="canter",
                steps=steps,
                seeds=[seed for part in same for seed in part["seeds"]],
                finals=[value for part in same for value in part["final_return"]],
                wall_s=sum(part["compile_s"] + part["run_s"] for part in same),
                programs=" + ".join(str(len(part["seeds"])) for part in same),
            )
        )
    return rows


def table(out: Path = OUT, returns: Path = RETURNS) -> str:
    """Markdown: per env with any run, per algorithm and budget, CB's seeds and canter's, with
    Welch's t-test of canter's final statistic against CB's at the same budget."""
    lines = [
        "| env | algorithm | library | env steps | seeds | final train return: mean (per seed) | "
        "score (% of the maximum) | published at 1e6 | wall time, compile included (seeds per "
        "program) | canter - CB: Welch t (p) |",
        "|---|---|---|---:|---|---|---:|---:|---|---|",
    ]
    for env, maximum in MAXIMUM.items():
        found = {algo: entries(out, returns, env, algo) for algo in (*SCRIPTS, *CANTER_ONLY)}
        if not any(found.values()):
            continue
        for algo, rows in found.items():
            published = CRAFTAX_PUBLISHED.get((algo, f"craftax:{env}"))
            published = f"{published[0]}%" if published else "none"
            if not rows:
                lines.append(f"| {env} | {algo} | | | | no finished run | | {published} | | |")
            for row in rows:
                finals = [v for v in row["finals"] if v is not None]
                peer = [
                    v
                    for other in rows
                    if other["library"] == "Craftax_Baselines" and other["steps"] == row["steps"]
                    for v in other["finals"]
                    if v is not None
                ]
                test = ""
                if row["library"] == "canter" and peer and finals:
                    t, p = harness.welch(finals, peer)
                    gap = harness.mean(finals) - harness.mean(peer)
                    test = f"{gap:+.2f}" + ("" if t != t else f": t = {t:.2f} (p = {p:.2f})")
                score = 100 * harness.mean(finals) / maximum if finals else float("nan")
                lines.append(
                    f"| {env} | {algo} | {row['library']} | {row['steps']:,} | "
                    f"{', '.join(map(str, row['seeds']))} | {cell(row['finals'])} | "
                    f"{score:.2f}% | {published} | {duration(row['wall_s'])} "
                    f"({row['programs']}) | {test} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cb-dir", help="a Craftax_Baselines checkout (for a run)")
    parser.add_argument("--cb-commit", default="7ce36fa05b84a2c9e758012f1e6da402e1e3a891")
    parser.add_argument("--script", choices=list(SCRIPTS), default="ppo")
    parser.add_argument("--env", choices=sorted(MAXIMUM), default="Craftax-Symbolic-v1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--num-steps", type=int, default=16)
    parser.add_argument("--lr", type=float, help="default: that of canter's preset for --script")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--returns", type=Path, default=RETURNS, help="returns.py's --out")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if not args.table_only:
        if args.cb_dir is None:
            parser.error("--cb-dir is needed for a run (or --table-only)")
        record = run(args)
        path = args.out / f"cb_{args.script}__{args.env}__seed{args.seed}.json"
        write_json(path, record)
        final = record["final_train_return"]
        print(f"{path}: final train return {final} ({record['score_percent']}% of the maximum)")
    text = table(args.out, args.returns)
    atomic_write(args.out / "craftax_peer.md", text)
    print(text)


if __name__ == "__main__":
    main()
