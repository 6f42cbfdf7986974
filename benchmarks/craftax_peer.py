"""Craftax_Baselines' own PPO (or PPO-RNN) on Craftax, its per-update training statistic saved.

The peer run beside `returns.py`'s Craftax rows: the reference's code, unmodified, at the same
budget and settings, on the same machine, so that canter's row compares like with like.
Craftax_Baselines (CB) is not on PyPI: check it out at the commit its presets cite and pass it.

    git clone https://github.com/MichaelTMatthews/Craftax_Baselines CB
    git -C CB checkout 7ce36fa05b84a2c9e758012f1e6da402e1e3a891
    pip install -e ".[craftax,bench]"   # flax, wandb and orbax: CB imports them at the top
    python benchmarks/craftax_peer.py --cb-dir CB --script ppo --seed 0

The defaults are the Craftax paper's 1M configuration that canter's `--preset
Craftax-Symbolic-v1` follows (256 envs x 16 steps, lr 3e-4, 1e6 env steps; algorithms/ppo.py).
CB reports its statistic through wandb only (ppo.py L582-592: the mean return of the episodes
that ended in each update, NaN dropped, `logz/batch_logging.py`). This script runs CB's
`run_ppo` as CB's command line would, with `wandb` replaced by a stand-in that keeps every
logged dict instead of sending it: nothing of CB is edited, and nothing leaves the machine.

Writes `results/peer_returns/cb_<script>__<env>__seed<k>.json`: the command, the per-update
returns (None where no episode ended), the final statistic (the last update's, as canter's
row reads it) and its score as % of the maximum, and the wall time (compile included), then
rebuilds `results/peer_returns/craftax_peer.md`: CB's seeds beside canter's finished programs of
the same preset (`returns.py --algo ppo --presets --envs Craftax-Symbolic-v1`, one program or
one per `--seeds-per-program` part, so a run spread over several sittings shows the seeds it
has), with Welch's t-test of the difference once both sides have two seeds.

    python benchmarks/craftax_peer.py --table-only   # rebuild craftax_peer.md
"""

import argparse
import json
import runpy
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from canter.common.run.files import atomic_write, write_json  # noqa: E402

from benchmarks import harness  # noqa: E402
from benchmarks.returns import CRAFTAX_PUBLISHED, duration  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "peer_returns"
RETURNS = Path(__file__).resolve().parent / "results" / "returns"
MAXIMUM = {"Craftax-Symbolic-v1": 226.0, "Craftax-Classic-Symbolic-v1": 22.0}
SCRIPTS = {"ppo": "ppo", "ppo_rnn": "ppo_rnn"}  # canter's file: CB's script


def stand_in_wandb(logged: list[dict]) -> types.ModuleType:
    """A `wandb` module whose `log` appends to `logged` and whose `init` does nothing."""
    module = types.ModuleType("wandb")
    module.init = lambda *args, **kwargs: None
    module.log = lambda data, *args, **kwargs: logged.append(dict(data))
    module.run = None
    return module


def cb_arguments(args: argparse.Namespace) -> list[str]:
    """CB's own flags for this run (its argparse; everything not named keeps CB's default)."""
    return [
        f"--env_name={args.env}",
        f"--total_timesteps={args.total_timesteps}",
        f"--num_envs={args.num_envs}",
        f"--num_steps={args.num_steps}",
        f"--lr={args.lr}",
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
    """The finished programs of returns.py's preset run of `algo` on `env`: its one summary, or
    one per `--seeds-per-program` part, in seed order. A part cut short is left out."""
    run = returns / "runs" / f"{algo}__{env}"
    parts = sorted(
        run.glob("seeds_*/summary.json"), key=lambda p: int(p.parent.name[6:].split("-")[0])
    )
    summaries = [json.loads(p.read_text()) for p in [run / "summary.json", *parts] if p.exists()]
    return [summary for summary in summaries if summary.get("complete")]


def cell(values: list[float], digits: int = 2) -> str:
    return f"{harness.mean(values):.{digits}f} ({', '.join(f'{v:.{digits}f}' for v in values)})"


def table(out: Path = OUT, returns: Path = RETURNS, env: str = "Craftax-Symbolic-v1") -> str:
    """Markdown: per algorithm, CB's seeds and canter's at the same preset and budget."""
    maximum = MAXIMUM[env]
    lines = [
        "| algorithm | library | env steps | seeds | final train return: mean (per seed) | "
        "score (% of the maximum) | published at 1e6 | wall time, compile included (seeds per "
        "program) | canter - CB: Welch t (p) |",
        "|---|---|---:|---|---|---:|---:|---|---|",
    ]
    for algo, script in SCRIPTS.items():
        published = CRAFTAX_PUBLISHED.get((algo, f"craftax:{env}"))
        published = f"{published[0]}%" if published else ""
        peers = [json.loads(p.read_text()) for p in out.glob(f"cb_{script}__{env}__seed*.json")]
        peers = sorted(peers, key=lambda record: record["seed"])
        parts = canter_parts(returns, algo, env)
        rows = {
            "Craftax_Baselines": (
                [r["seed"] for r in peers],
                [r["final_train_return"] for r in peers],
                {r["env_steps"] for r in peers},
                sum(r["wall_s"] for r in peers),
                " + ".join("1" for _ in peers),
            ),
            "canter": (
                [seed for part in parts for seed in part["seeds"]],
                [value for part in parts for value in part["final_return"]],
                {part["env_steps"] for part in parts},
                sum(part["compile_s"] + part["run_s"] for part in parts),
                " + ".join(str(len(part["seeds"])) for part in parts),
            ),
        }
        for library, (seeds, finals, steps, wall_s, programs) in rows.items():
            if not seeds:
                lines.append(f"| {algo} | {library} | | | no finished run | | {published} | | |")
                continue
            test = ""
            if library == "canter" and rows["Craftax_Baselines"][0]:
                t, p = harness.welch(finals, rows["Craftax_Baselines"][1])
                gap = harness.mean(finals) - harness.mean(rows["Craftax_Baselines"][1])
                test = f"{gap:+.2f}" + ("" if t != t else f": t = {t:.2f} (p = {p:.2f})")
            lines.append(
                f"| {algo} | {library} | {', '.join(f'{s:,}' for s in sorted(steps))} | "
                f"{', '.join(map(str, seeds))} | {cell(finals)} | "
                f"{100 * harness.mean(finals) / maximum:.2f}% | {published} | "
                f"{duration(wall_s)} ({programs}) | {test} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cb-dir", help="a Craftax_Baselines checkout (for a run)")
    parser.add_argument("--cb-commit", default="7ce36fa05b84a2c9e758012f1e6da402e1e3a891")
    parser.add_argument("--script", choices=["ppo", "ppo_rnn"], default="ppo")
    parser.add_argument("--env", choices=sorted(MAXIMUM), default="Craftax-Symbolic-v1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--num-steps", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-4)
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
    text = table(args.out, args.returns, args.env)
    atomic_write(args.out / "craftax_peer.md", text)
    print(text)


if __name__ == "__main__":
    main()
