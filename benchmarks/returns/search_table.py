"""The table of a preset search: every point of every run under `results/search/`, one row each.

A search run is an algorithm file's own command, a preset with flags on top and `--sweep` over
the traced fields, written to `results/search/<algo>__<env>__<what>/` (issue 71: the presets
at a budget with no published configuration are chosen by measurement):

    python algorithms/pqn_rnn.py --preset Craftax-Symbolic-v1 --num-seeds 2 \\
        --sweep exploration_fraction=0.3,0.5 --end-e 0.01 \\
        --run-dir benchmarks/results/search/pqn_rnn__Craftax-Symbolic-v1__exploration
    python benchmarks/returns/search_table.py   # rebuilds results/search/search.md

Each row is one sweep point: the fields where it differs from the algorithm's preset of the
env's name, its seeds, each seed's final training statistic (the mean return of the episodes
that ended in the last iteration that had one, the Craftax_Baselines statistic canter's Craftax
rows read) and its mean, as % of Craftax's maximum (226) on Craftax, the final greedy or
sampled evaluation's mean, how far the run got (a run still going says so) and its wall time,
compile included, on the machine that builds the table. The preset's
own row (its returns.py run, `results/returns/runs/<algo>__<env>/`) leads each group, so that
every point reads against it, followed by the rows kept from the preset before a search changed
it (`<algo>__<env>__before-<issue>/`). docs/results.md shows the table.
"""

import argparse
import csv
import dataclasses
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.returns import returns  # noqa: E402

SEARCH = harness.RESULTS / "search"
CRAFTAX_MAX = 226.0  # Craftax's maximum score: its README's percentages divide by it
# A search's wall time is labelled with the machine that builds the table: a search is run and
# tabled on one machine (its run directory does not record the machine).
HERE = returns.machine({"machine": harness.machine()})


def final_rows(run: Path) -> list[dict]:
    """The last row of each seed's metrics.csv under `run` (any depth), with its seed label."""
    rows = []
    for path in sorted(run.glob("**/seed_*/metrics.csv")):
        with path.open() as f:
            lines = list(csv.DictReader(f))
        if lines:
            rows.append({"label": path.parent.relative_to(run).as_posix(), **lines[-1]})
    return rows


def points(run: Path) -> list[tuple[dict, str]]:
    """(the point's fields that differ from the preset, its folder prefix) of each sweep
    point of the run in `run`, in the runner's order (point_<p>/)."""
    from canter.common.run.batch import make_batch

    record = json.loads((run / "config.json").read_text())
    algo, sweep = record["algo"], record.get("sweep") or {}
    module = importlib.import_module(f"canter.algorithms.{algo}")
    fields = {f.name for f in dataclasses.fields(module.Config)}
    config = module.Config(**{k: v for k, v in record.items() if k in fields})
    preset = module.Config(**module.PRESETS.get(preset_name(config.env), {}))
    batch = make_batch(config, sweep)
    out = []
    for p, point in enumerate(batch.point_configs):
        differs = {
            f: getattr(point, f)
            for f in sorted(fields - {"num_seeds", "seed", "env"})
            if getattr(point, f) != getattr(preset, f)
        }
        out.append((differs, f"point_{p}/" if sweep else ""))
    return out


def preset_name(env: str) -> str:
    return env.split(":")[-1]


def score(value: float, env: str) -> str:
    if "Craftax" in env:
        return f"{value:.2f} ({100 * value / CRAFTAX_MAX:.2f}%)"
    return f"{value:.2f}"


def row(algo: str, env: str, setting: str, seeds: list[dict], done: bool, wall: str) -> str:
    train = [float(s["train/episodic_return"]) for s in seeds]
    evals = [float(s["eval/episodic_return"]) for s in seeds]
    steps = min(int(s["env_steps"]) for s in seeds)
    done = "" if done else f" (at {steps:,} env steps: running)"
    per_seed = ", ".join(f"{t:.2f}" for t in train)
    mean_train = sum(train) / len(train)
    mean_eval = sum(evals) / len(evals)
    cells = [algo, preset_name(env), setting, str(len(seeds)), per_seed]
    cells += [score(mean_train, env) + done, f"{mean_eval:.2f}", wall]
    return "| " + " | ".join(cells) + " |"


def setting_text(differs: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in differs.items()) or "the preset"


def table() -> str:
    header = (
        "| algorithm | env | setting (against the preset) | seeds | final training statistic "
        "per seed | mean (% of max) | evaluation mean | wall (machine) |\n"
        "|---|---|---|---:|---|---:|---:|---|"
    )
    lines, groups = [header], {}
    for run in sorted(p for p in SEARCH.iterdir() if (p / "config.json").exists()):
        record = json.loads((run / "config.json").read_text())
        groups.setdefault((record["algo"], record["env"]), []).append(run)
    for (algo, env), runs in groups.items():
        baseline = harness.RESULTS / "returns" / "runs" / f"{algo}__{preset_name(env)}"
        if baseline.exists():
            summaries = [json.loads(p.read_text()) for p in baseline.glob("**/summary.json")]
            done = bool(summaries) and all(s["complete"] for s in summaries)
            seeds = final_rows(baseline)
            lines.append(row(algo, env, "the preset (returns table)", seeds, done, "its row"))
        for earlier in sorted(baseline.parent.glob(f"{baseline.name}{returns.EARLIER}*")):
            # A row kept from the preset before a change: the search that changed it reads
            # against it too (its fields where it differs from today's preset).
            issue, _, what = earlier.name.split(returns.EARLIER)[-1].partition("-")
            part = next(earlier.glob("**/config.json")).parent
            differs = setting_text(points(part)[0][0])
            issue = f"{issue}'s {what} change" if what else issue
            setting = f"the preset before issue {issue} (returns table): {differs}"
            lines.append(row(algo, env, setting, final_rows(earlier), True, "its row"))
        for run in runs:
            summary_path = run / "summary.json"
            wall, done = "running", False
            if summary_path.exists():
                summary = json.loads(summary_path.read_text())
                wall, done = f"{summary['run_s'] / 60:.0f} min ({HERE})", summary["complete"]
            seeds = final_rows(run)
            for differs, prefix in points(run):
                mine = [s for s in seeds if s["label"].startswith(prefix)]
                if mine:
                    lines.append(row(algo, env, setting_text(differs), mine, done, wall))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if search.md is stale")
    args = parser.parse_args()
    text = table()
    out = SEARCH / "search.md"
    if args.check:
        raise SystemExit(0 if out.exists() and out.read_text() == text else 1)
    harness.write(out, text)
    print(text)


if __name__ == "__main__":
    main()
