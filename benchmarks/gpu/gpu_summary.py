"""One table of the head-to-heads that benchmarks/gpu/gpu.sh ran: the ratios issue 27 sets targets
on.

Reads the JSON files the speed scripts wrote into one directory (`speed_ppo-minatar.json`,
`speed.json`, `speed_dqn.json`, `speed_dqn-minatar.json`, `speed_pqn-minatar.json`,
`runner_overhead.json`; any may be missing, its rows are then left out) and writes
`summary.md` there: per work and seed count, canter's pure program and CLI runner against
rejax and the CLI against the pure program (medians of the per-round ratios, per-round values
beside them), then DQN's and PQN's MinAtar env steps/s against random actions in the same envs.

    python benchmarks/gpu/gpu_summary.py benchmarks/results/gpu
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

HEAD_TO_HEADS = (
    ("speed_ppo-minatar.json", "PPO Breakout-MinAtar, gymnax-blines config"),
    ("speed.json", "PPO CartPole-v1, PureJaxRL config"),
    ("speed_dqn.json", "DQN CartPole-v1, PureJaxRL config"),
)
CEILINGS = (
    ("speed_dqn-minatar.json", "DQN MinAtar preset, Breakout, 1 env (CLI runner)"),
    ("speed_pqn-minatar.json", "PQN MinAtar preset, Breakout, 128 envs (CLI runner)"),
)


def per_round(rounds: list[dict], impl: str, peer: str) -> str:
    """`impl`'s run time over `peer`'s, median (per round); blank where either did not run."""
    if not all(impl in r and peer in r for r in rounds):
        return ""
    return harness.ratio_cell([r[impl]["run_s"] / r[peer]["run_s"] for r in rounds])


def head_to_head_rows(directory: Path) -> list[str]:
    lines = []
    for name, work in HEAD_TO_HEADS:
        path = directory / name
        if not path.exists():
            continue
        for num_seeds, row in json.loads(path.read_text())["rows"].items():
            rounds = row["rounds"]
            first = rounds[0]["canter"]
            steps = first["num_envs"] * first["num_steps"] * first["iterations"]
            rejax_s = statistics.median(r["rejax"]["run_s"] for r in rounds)
            cells = [
                f"{work}, {steps:,} env steps",
                num_seeds,
                per_round(rounds, "canter-pure", "rejax"),
                per_round(rounds, "canter", "rejax"),
                per_round(rounds, "canter", "canter-pure"),
                f"{rejax_s:.2f}",
                len(rounds),
            ]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def ceiling_rows(directory: Path) -> list[str]:
    lines = []
    for name, work in CEILINGS:
        path = directory / name
        if not path.exists():
            continue
        rounds = json.loads(path.read_text())["rounds"]
        first = rounds[0]["canter"]
        steps = first["num_envs"] * first["num_steps"] * first["iterations"]
        speed = statistics.median(r["canter"]["steps_per_s"] for r in rounds)
        ceiling = statistics.median(r["random"]["steps_per_s"] for r in rounds)
        ratio = harness.ratio_cell(harness.ratios(rounds, "canter", "random", "steps_per_s"), 3)
        cells = [f"{work}, {steps:,} env steps", f"{speed:,.0f}", f"{ceiling:,.0f}", ratio]
        lines.append("| " + " | ".join(cells) + " | " + str(len(rounds)) + " |")
    return lines


def summary(directory: Path) -> str:
    machine = None
    for path in sorted(directory.glob("*.json")):
        machine = machine or json.loads(path.read_text()).get("machine")
    lines = [
        "| work (per seed) | seeds | canter pure jit / rejax | canter CLI runner / rejax "
        "| CLI / pure | rejax run (s) | rounds |",
        "|---|---:|---|---|---|---:|---:|",
        *head_to_head_rows(directory),
        "",
        "| work | env steps/s per seed | random policy, same envs | algorithm / random | rounds |",
        "|---|---:|---:|---|---:|",
        *ceiling_rows(directory),
        "",
        f"Machine: {machine}. Run time excludes compilation; ratios are taken within a round "
        "(fresh processes in turn), median (per round).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    directory = parser.parse_args().directory
    text = summary(directory)
    harness.write(directory / "summary.md", text)
    print(text)


if __name__ == "__main__":
    main()
