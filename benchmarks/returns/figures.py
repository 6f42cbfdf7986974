"""The learning-curve figures of docs/results.md, drawn from returns.py's runs.

One figure per suite (every algorithm on each env of the suite) and one per algorithm (each env
it ran), from `results/returns/<algo>__<env>.json` and the per-seed `metrics.csv` of its run;
results kept from earlier presets (`__before-<issue>`) are left out, as in the returns table.
A curve is the mean over the row's seeds with a 95% bootstrap band (the interval of the mean);
the legend gives the seeds and whether evaluation was greedy or sampled. Marked beside it: the
published reference as a dotted line at its number (its budget in the legend; none where the
reference published curves only), the peer's own code at canter's settings as a dashed curve
(sbx on MuJoCo, Craftax_Baselines on Craftax, CleanRL on Atari: `results/peer_returns/`, read at
canter's evaluation points), and the random policy's return (dash-dot) where measured. A suite
panel plots the evaluation return, except where the reference and the peer report the training
statistic (Craftax, Atari); an algorithm's panels plot both. Beside each `<name>.png`,
`<name>.md` tables the rows it shows (docs/results.md renders both).

    python benchmarks/returns/figures.py           # redraw every figure and table
    python benchmarks/returns/figures.py --check   # change nothing; exit 1 naming what is stale

Each PNG carries the SHA-256 of the data it plots (its `Source` text), so that a check can tell
a figure out of step with its runs without drawing it (tests/test_docs.py runs `stale`).
"""

import argparse
import csv
import hashlib
import io
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.returns import returns  # noqa: E402
from benchmarks.returns.atari_peer import at_steps  # noqa: E402

SUITES = {  # key: title, in docs/results.md's order
    "classic": "Classic control and bsuite",
    "minatar": "MinAtar",
    "craftax": "Craftax-Symbolic",
    "host": "MuJoCo and Atari (Gymnasium on the host)",
    "physics": "Playground's DM Control and Brax",
    "jumanji_minigrid": "Jumanji and XLand-MiniGrid",
    "board": "Board games (pgx), mean outcome against the opponent",
    "teams": "Teams of agents (JaxMARL), the team's return",
}
COLORS = {  # one per algorithm, distinct among those that share a panel
    **dict(ppo="tab:blue", ppo_atari="tab:blue", dqn="tab:green", pqn="tab:red"),
    **dict(ppo_rnn="tab:purple", ppo_trxl="tab:brown", pqn_rnn="tab:pink", ppo_rnd="tab:olive"),
    **dict(ppo_continuous="tab:blue", sac="tab:orange", td3="tab:green", fast_td3="tab:red"),
}
PEERS = {"sbx": "sbx", "cb": "Craftax_Baselines", "cleanrl": "CleanRL"}  # file prefix: library
KEY = (
    "mean over seeds, band: 95% bootstrap interval of the mean; dotted: published reference "
    "(its budget in the legend); dashed: the peer's own code; dash-dot: random actions"
)


def suite(env: str) -> str:
    """The key of SUITES an env id belongs to."""
    prefixes = {"craftax:": "craftax", "gymnasium:": "host", "playground:": "physics"}
    prefixes |= {
        "brax:": "physics",
        "jumanji:": "jumanji_minigrid",
        "xminigrid:": "jumanji_minigrid",
        "pgx:": "board",
        "jaxmarl:": "teams",
    }
    if env.endswith("-MinAtar"):
        return "minatar"
    return next((key for prefix, key in prefixes.items() if env.startswith(prefix)), "classic")


def training_statistic(env: str) -> bool:
    """Whether a suite panel plots the training statistic: where the reference and the peer
    report it (Craftax's README and Craftax_Baselines, CleanRL on Atari)."""
    return env.startswith("craftax:") or "NoFrameskip" in env


def short(steps: float) -> str:
    """1e6 as `1M`, 150,000 as `150k`."""
    return f"{steps / 1e6:.3g}M" if steps >= 1e6 else f"{steps / 1e3:.0f}k"


def run(path: Path) -> dict:
    """One row of the returns table: its record, the env and evaluation its config names, the
    evaluation points and each seed's `eval` and `train` returns there (from every
    `seed_*/metrics.csv` of its run, the parts of a run trained in turn included)."""
    folder = path.parent / "runs" / path.stem
    config = json.loads(min(folder.glob("**/config.json")).read_text())
    logs = sorted(folder.glob("**/seed_*/metrics.csv"), key=lambda p: int(p.parent.name[5:]))
    rows = [list(csv.DictReader(log.read_text().splitlines())) for log in logs]
    steps = [int(row["env_steps"]) for row in rows[0]]
    if any([int(row["env_steps"]) for row in seed] != steps for seed in rows):
        raise SystemExit(f"{folder}: its seeds were evaluated at different env steps")
    curves = {
        group: [[float(row[f"{group}/episodic_return"]) for row in seed] for seed in rows]
        for group in ("eval", "train")
    }
    policy = config.get("eval_policy", "greedy")
    record = json.loads(path.read_text())
    episodes = config.get("num_eval_envs")
    return dict(
        record=record, env=config["env"], policy=policy, episodes=episodes, steps=steps, **curves
    )


def peers(results: Path, r: dict) -> list[dict]:
    """The peer's seeds run at a row's settings, as one curve: sbx's own evaluations, or the
    training statistic of Craftax_Baselines' updates or CleanRL's iterations read at the row's
    evaluation points as canter reads its own (benchmarks/returns/atari_peer.py)."""
    curves = []
    for prefix, library in PEERS.items():
        name = f"{prefix}_{r['record']['algo']}__{r['env'].split(':')[-1]}__seed*.json"
        found = [json.loads(p.read_text()) for p in sorted((results / "peer_returns").glob(name))]
        if not found:
            continue
        if "curve" in found[0]:  # sbx: evaluations of its own
            steps = [point["env_steps"] for point in found[0]["curve"]]
            values = [[point["eval_return"] for point in seed["curve"]] for seed in found]
        else:
            steps = r["steps"]
            batch = found[0]["env_steps"] // len(found[0]["episode_return"])
            values = [at_steps(seed["episode_return"], batch, steps) for seed in found]
        label = f"{library}'s {r['record']['algo']} ({len(found)} seeds)"
        curves.append(dict(label=label, steps=steps, values=values))
    return curves


def references(r: dict) -> list[dict]:
    """The published number a row is set beside, as a line: the reference's return (Craftax's:
    its score of the maximum), its source and budget in the label."""
    algo, env = r["record"]["algo"], r["env"]
    if (algo, env) in returns.CRAFTAX_PUBLISHED:
        score, at, whose = returns.CRAFTAX_PUBLISHED[algo, env]
        y = score / 100 * returns.CRAFTAX_MAX[env]
        return [dict(label=f"{whose}: {score:g}% ({y:.2f}) at {short(at)}", y=y)]
    value, budget, source = returns.reference(algo, r["record"]["env"])
    if value is None:
        return []
    return [dict(label=f"{source.split(';')[0]}: {value:g} at {short(budget)}", y=value)]


def panel(results: Path, env: str, rows: list[dict], both: bool) -> dict:
    """One env's panel: each row's curve (both statistics with `both`, else the one its
    references report), the peers', the references and the random policy's return."""
    train = training_statistic(env) and not both
    series, lines = [], []
    for r in rows:
        algo, seeds, color = r["record"]["algo"], len(r["eval"]), COLORS.get(r["record"]["algo"])
        evaluation = f"{r['policy']} evaluation, {seeds} seeds"
        if both or not train:
            label = evaluation if both else f"{algo} ({evaluation})"
            series.append(
                dict(label=label, color=color, style="-", steps=r["steps"], values=r["eval"])
            )
        if both or train:
            label = (
                f"training return, {seeds} seeds" if both else f"{algo} (training, {seeds} seeds)"
            )
            style = "--" if both else "-"
            series.append(
                dict(label=label, color=color, style=style, steps=r["steps"], values=r["train"])
            )
        for peer in peers(results, r):
            series.append(dict(peer, color="tab:gray" if both else color, style="--"))
        lines += [dict(ref, color="black" if both else color, style=":") for ref in references(r)]
    shared = [line["label"] for line in lines]
    lines = [  # a reference several rows share (gymnax-blines' on classic control): once, black
        dict(line, color="black") if shared.count(line["label"]) > 1 else line
        for i, line in enumerate(lines)
        if line["label"] not in shared[:i]
    ]
    if (random := returns.random_return(env)) is not None:
        lines.append(
            dict(label=f"random actions: {random:.2f}", y=random, color="gray", style="-.")
        )
    title = f"{env} ({'training return' if train else 'evaluation return'})"
    return dict(title=env if both else title, series=series, lines=lines)


def plan(results: Path = harness.RESULTS) -> dict[str, dict]:
    """Every figure's data, by name: one per suite with rows, one per algorithm; each with the
    rows it shows (their records) and its panels."""
    paths = sorted((results / "returns").glob("*__*.json"))
    rows = [run(p) for p in paths if returns.EARLIER not in p.stem]
    order = {key: i for i, key in enumerate(SUITES)}
    rows.sort(key=lambda r: (order[suite(r["env"])], r["env"], r["record"]["algo"]))
    figures = {}
    for key, title in SUITES.items():
        mine = [r for r in rows if suite(r["env"]) == key]
        envs = list(dict.fromkeys(r["env"] for r in mine))
        panels = [panel(results, env, [r for r in mine if r["env"] == env], False) for env in envs]
        figures[key] = dict(title=title, rows=mine, panels=panels)
    for algo in sorted({r["record"]["algo"] for r in rows}):
        mine = [r for r in rows if r["record"]["algo"] == algo]
        panels = [panel(results, r["env"], [r], True) for r in mine]
        figures[algo] = dict(title=algo, rows=mine, panels=panels)
    return {name: figure for name, figure in figures.items() if figure["rows"]}


def digest(figure: dict) -> str:
    """The SHA-256 of what a figure plots (its panels), written into its PNG."""
    text = json.dumps([figure["title"], figure["panels"]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def draw(figure: dict) -> bytes:
    """The figure as a PNG: a grid of panels, each with its legend below it, the key on top. A
    reference far off the curves' range (a budget ten times the row's) is named in the legend
    and left off the axis, so that the curves keep their scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from canter.common.run.report import bootstrap_band, short_number
    from matplotlib.ticker import FuncFormatter, MaxNLocator
    from PIL import Image, PngImagePlugin

    panels = figure["panels"]
    cols = 2 if len(panels) in (2, 4) else min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    size = (5.0 * cols + 2.0 * (cols == 1), 4.6 * rows + 0.6)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
    for ax, spec in zip(axes.flat, panels, strict=False):
        for s in spec["series"]:
            mean, low, high = bootstrap_band(s["values"])
            style = dict(color=s["color"], marker="o" if len(s["steps"]) <= 25 else None)
            ax.plot(s["steps"], mean, s["style"], label=s["label"], markersize=3, **style)
            ax.fill_between(s["steps"], low, high, color=s["color"], alpha=0.15)
        bottom, top = ax.get_ylim()
        span = top - bottom
        for line in spec["lines"]:
            off = not bottom - 0.5 * span <= line["y"] <= top + 0.5 * span
            label = line["label"] + (" (off the axis)" if off else "")
            ax.axhline(line["y"], color=line["color"], ls=line["style"], lw=1, label=label)
            if not off:
                bottom, top = min(bottom, line["y"]), max(top, line["y"])
        ax.set_ylim(bottom - 0.05 * (top - bottom), top + 0.05 * (top - bottom))
        ax.set_title(spec["title"], fontsize=9)
        ax.set_xlabel("env steps (per seed)", fontsize=8)
        ax.set_ylabel("episodic return", fontsize=8)
        ax.set_xlim(left=0)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(FuncFormatter(short_number))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(f"{figure['title']}: {KEY}", fontsize=9, wrap=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    buffer.seek(0)
    # 256 colours and the digest as the PNG's `Source` text: about a third of the bytes
    image = Image.open(buffer).convert("RGB").quantize(256)
    info = PngImagePlugin.PngInfo()
    info.add_text("Source", digest(figure))
    png = io.BytesIO()
    image.save(png, format="png", optimize=True, pnginfo=info)
    return png.getvalue()


def table(figure: dict, by_algorithm: bool) -> str:
    """The rows a figure shows, in short (each row's flags are in the returns table)."""
    head = ["env", "setting", "env steps", "seeds", "evaluation", "final eval return mean +- std"]
    head += ["final train return", "published at env steps", "wall time (machine)"]
    head = head if by_algorithm else ["algorithm", *head]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in figure["rows"]:
        record = r["record"]
        preset = f"`--preset {record['preset']}`" if record.get("preset") else ""
        setting = " and ".join(filter(None, [preset, "flags" * bool(record["overrides"])]))
        cells = [r["env"], setting or "defaults", f"{record['env_steps']:,}"]
        cells += [str(record["num_seeds"]), f"{r['policy']}, {r['episodes']} episodes"]
        cells += [f"{record['mean']:.1f} +- {record['std']:.1f}"]
        cells += [f"{record['final_train_return_mean']:.1f}{returns.old_mark(record)}"]
        cells += [returns.published(record) or "none", returns.wall(record)]
        cells = cells if by_algorithm else [record["algo"], *cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def outputs(figures: dict[str, dict], out: Path) -> dict[Path, str]:
    """Each file the figures make, with the digest (a PNG) or the text (a table) it must hold."""
    files = {}
    for name, figure in figures.items():
        files[out / f"{name}.png"] = digest(figure)
        files[out / f"{name}.md"] = table(figure, by_algorithm=name not in SUITES)
    return files


def stale(results: Path = harness.RESULTS) -> list[str]:
    """The figure files missing, out of step with the runs, or no longer made."""
    from PIL import Image

    out = results / "figures"
    expected = outputs(plan(results), out)
    wrong = []
    for path, content in expected.items():
        if not path.exists():
            wrong.append(f"{path.name}: missing")
        elif path.suffix == ".png" and Image.open(path).text.get("Source") != content:
            wrong.append(f"{path.name}: drawn from other data")
        elif path.suffix == ".md" and path.read_text() != content:
            wrong.append(f"{path.name}: other rows")
    made = set(out.glob("*.png")) | set(out.glob("*.md")) if out.exists() else set()
    wrong += [f"{path.name}: no longer made" for path in sorted(made - set(expected))]
    return wrong


def main(argv: list[str] | None = None, results: Path = harness.RESULTS) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        wrong = stale(results)
        print("\n".join(wrong) or "every figure is in step with its runs")
        return 1 if wrong else 0
    out = results / "figures"
    out.mkdir(parents=True, exist_ok=True)
    figures = plan(results)
    for path in set(out.glob("*.png")) | set(out.glob("*.md")):
        path.unlink()  # a figure no longer made goes
    for name, figure in figures.items():
        harness.write(out / f"{name}.png", draw(figure))
        harness.write(out / f"{name}.md", table(figure, by_algorithm=name not in SUITES))
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
