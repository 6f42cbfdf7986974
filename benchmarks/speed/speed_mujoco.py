"""canter's SAC and TD3 against sbx's on HalfCheetah-v5, in fresh processes, in turn.

CleanRL's MuJoCo settings on both sides (benchmarks/speed/mujoco_peer.py says what each side runs),
1e5 env steps, one seed, fresh processes taking turns (benchmarks/harness.py): env steps/s,
run and compile time, peak RSS, final return, and canter over sbx within each round. Then a
bound: canter's updates alone (gymnax Pendulum-v1 in place of the simulator, same networks,
9,000 updates) give the highest env steps/s canter could reach on the 1e5-step run with a free
simulator and a free warm-up; and canter's cost of 4 seeds against 1 at 3e4 steps. `--algo td3`
measures one algorithm and keeps the other's rows (the `mujoco` and `bench` extras).

    pip install -e ".[mujoco,bench]"
    python benchmarks/speed/speed_mujoco.py                          # SAC and TD3
    python benchmarks/speed/speed_mujoco.py --algo td3 --repeats 1   # TD3 only

Writes benchmarks/results/speed_mujoco.json and speed_mujoco.md (rendered from the JSON).
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

SCRIPT = __file__
MUJOCO_STEPS, MUJOCO_SEED_STEPS = 100_000, 30_000  # TD3's 25,000 warm-up steps come first
MUJOCO_UPDATE_STEPS = 10_000  # canter-updates: 1,000 random steps, then 9,000 updates
PAIR = ("canter", "sbx")


def work(impl: str, algo: str, num_seeds: int, total_timesteps: int) -> dict:
    """The worker, `--worker IMPL ALGO SEEDS STEPS`: one run of canter's or sbx's SAC / TD3 on
    HalfCheetah-v5, or (`canter-updates`) canter's updates alone, on gymnax's Pendulum-v1 with
    the same networks."""
    from benchmarks.speed import mujoco_peer

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
        "peak_rss_mb": harness.peak_rss_mb(),
        "preset_learning_starts": preset.learning_starts,
    }


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
    lines = []
    rounds = harness.rounds(
        repeats,
        PAIR,
        lambda impl: harness.spawn(SCRIPT, impl, algo, 1, MUJOCO_STEPS),
        lambda r: (
            f"{r['run_s']:.1f} s ({r['steps_per_s']:,.0f} steps/s, return "
            f"{r['final_returns'][0]:.0f})"
        ),
        f"{algo} ",
    )
    for field, label, fmt in (
        ("steps_per_s", "env steps/s", "{:,.0f}"),
        ("run_s", "run time (s)", "{:.1f}"),
        ("compile_s", "compile time (s)", "{:.1f}"),
        ("peak_rss_mb", "peak RSS (MiB)", "{:,.0f}"),
    ):
        cells = [fmt.format(harness.median(rounds, i, field)) for i in PAIR]
        ratios = harness.ratios(rounds, "canter", "sbx", field)
        ratio = harness.ratio_cell(ratios) if field != "compile_s" else ""
        lines.append(f"| {algo} | {label} | {cells[0]} | {cells[1]} | {ratio} |")
    returns = [harness.mean([r[i]["final_returns"][0] for r in rounds]) for i in PAIR]
    lines.append(
        f"| {algo} | final eval return (mean over rounds) | {returns[0]:.0f} | {returns[1]:.0f} | |"
    )
    free = harness.spawn(SCRIPT, "canter-updates", algo, 1, MUJOCO_UPDATE_STEPS)
    bound, ratios = update_bound(free, [r["sbx"]["steps_per_s"] for r in rounds])
    lines.append(
        f"| {algo} | env steps/s bound: updates alone ({free['updates_per_s']:,.0f}/s on gymnax "
        f"Pendulum-v1), simulator and warm-up free | {bound:,.0f} | | "
        f"{harness.ratio_cell(ratios)} |"
    )
    print(lines[-1], flush=True)
    seeds = {n: harness.spawn(SCRIPT, "canter", algo, n, MUJOCO_SEED_STEPS) for n in (1, 4)}
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


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--algo",
        nargs="+",
        choices=["sac", "td3"],
        default=["sac", "td3"],
        help="the algorithms to measure (the others' rows are kept)",
    )
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    machine = harness.machine()
    print(f"{' and '.join(args.algo)} against sbx, HalfCheetah-v5, {machine}", flush=True)
    path = args.out / "speed_mujoco.json"
    measured = json.loads(path.read_text()) if path.exists() else {}
    for algo in args.algo:
        rows = mujoco_rows(algo, args.repeats)
        date = time.strftime("%Y-%m-%d")
        measured[algo] = {"rows": rows, "repeats": args.repeats, "machine": machine, "date": date}
        harness.write(path, json.dumps(measured, indent=1) + "\n")
        harness.write(args.out / "speed_mujoco.md", mujoco_table(measured) + "\n")
    print(mujoco_table(measured))


if __name__ == "__main__":
    main()
