"""What a run tells its user: the progress line, the summary, the final report, the curve PNG."""

import io
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from canter.common.run.batch import Batch
from canter.common.run.files import atomic_write

Say = Callable[..., None]


class Progress:
    """A tqdm bar on a terminal, one plain line per interval otherwise: `(i, line)` after
    interval i, `(None, _)` closes; `pulse(line)` tells how the interval in flight goes (the
    bar's text, refreshed in place, or a plain line; common/run/heartbeat.py)."""

    def __init__(self, total: int, first: int, say: Say | None) -> None:
        self.total, self.say, self.done, self.bar = total, say, first, None
        if say is not None and sys.stdout.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=first, unit="interval", dynamic_ncols=True)

    def __call__(self, i: int | None, line: str) -> None:
        if self.say is None:
            return
        if self.bar is not None:
            if i is None:
                self.bar.close()
            else:
                self.bar.set_postfix_str(line.replace("  ", " "), refresh=False)
                self.bar.update(1)
        elif i is not None:
            self.say(f"[{i + 1:>3}/{self.total}] {line}", flush=True)
        if i is not None:
            self.done = i + 1

    def pulse(self, line: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(line.replace("  ", " "))  # refreshed: the clock moves
        elif self.say is not None:
            self.say(f"[{self.done:>3}/{self.total}] {line}", flush=True)


def progress(total: int, first: int, say: Say | None) -> Progress:
    """The progress of intervals `first` to `total` - 1 (nothing with `say` None)."""
    return Progress(total, first, say)


def summarize(
    *,
    algo: str,
    batch: Batch,
    metrics: dict[str, dict[str, np.ndarray]],
    env_steps: int,
    complete: bool,
    stopped: str | None,
    diverged: list[dict[str, Any]],
    compile_s: float,
    run_s: float,
    host_s: float,
) -> dict[str, Any]:
    """summary.json: final training and evaluation returns per entry and per point, timings,
    why the run stopped early (if it did), and the diverged seeds.

    `metrics` are arranged (`[(points,) seeds, intervals]`); `env_steps` are one seed's.
    Means and stds are over the seeds that stayed finite (NaN where none did).
    """
    final = metrics["train"]["episodic_return"][..., -1]
    final_eval = metrics["eval"]["episodic_return"][..., -1]
    num_points = len(batch.points)
    healthy = np.ones((num_points, len(batch.seeds)), bool)
    for d in diverged:
        healthy[batch.points.index(d["point"]), batch.seeds.index(d["seed"])] = False
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: every seed diverged
        per_point = [
            {
                **values,
                "final_return_mean": float(np.nanmean(f[ok])),
                "final_return_std": float(np.nanstd(f[ok])),
                "eval_return_mean": float(np.nanmean(e[ok])),
                "eval_return_std": float(np.nanstd(e[ok])),
                "finite_seeds": int(ok.sum()),
            }
            for values, f, e, ok in zip(
                batch.points,
                final.reshape(num_points, -1),
                final_eval.reshape(num_points, -1),
                healthy,
                strict=True,
            )
        ]
    return {
        "env": batch.config.env,
        "algo": algo,
        "num_seeds": len(batch.seeds),
        "seeds": batch.seeds,
        "sweep": batch.sweep,
        "total_timesteps": batch.config.total_timesteps,
        "env_steps": env_steps,
        "intervals": int(metrics["train"]["episodic_return"].shape[-1]),
        "complete": complete,
        "stopped": stopped,
        "diverged": diverged,
        "compile_s": compile_s,
        "run_s": run_s,
        "host_s": host_s,
        "env_steps_per_s": env_steps * batch.size / run_s,
        "final_return": final.tolist(),
        "eval_return": final_eval.tolist(),
        **(per_point[0] if not batch.sweep else {}),
        "points": per_point,
    }


def report(say: Say, summary: dict[str, Any]) -> None:
    """The lines printed at the end of a run: returns (per point in a sweep) and timings."""
    if summary["sweep"]:
        names = list(summary["sweep"])
        say("point  " + "  ".join(f"{n:>14}" for n in names) + "          return            eval")
        for p, point in enumerate(summary["points"]):
            say(
                f"{p:>5}  "
                + "  ".join(f"{point[n]:>14.6g}" for n in names)
                + f"  {_spread(point, 'final', 8, 6)}  {_spread(point, 'eval', 8, 6)}"
            )
    else:
        finite, num_seeds = summary["finite_seeds"], summary["num_seeds"]
        seeds = f"{num_seeds} seed" + ("s" if num_seeds != 1 else "")
        seeds += f", {finite} finite" if finite < num_seeds else ""
        say(
            f"done: return {_spread(summary, 'final')}  eval {_spread(summary, 'eval')}"
            f"  ({seeds}, {summary['env_steps']:,} env steps each)"
        )
    if _unended(summary):
        say(
            "      return -: no training episode ended in the last interval (episodes outlast "
            "it); metrics.csv has the intervals in which episodes ended"
        )
    for d in summary["diverged"]:
        where = ", ".join(f"{k}={v:g}" for k, v in d["point"].items())
        say(
            f"      DIVERGED: seed {d['seed']}{' at ' + where if where else ''} from interval "
            f"{d['interval']} ({d['env_steps']:,} env steps); excluded from the means above"
        )
    say(
        f"      compile {summary['compile_s']:.1f} s  run {summary['run_s']:.1f} s  "
        f"{summary['env_steps_per_s']:,.0f} env steps/s (all seeds)"
    )


def _spread(values: dict, which: str, width: int = 0, std_width: int = 0) -> str:
    """`mean +- std` of `<which>_return_*`; "-" where it is NaN: no training episode ended in
    the last interval, or every seed diverged (the report's DIVERGED lines say which)."""
    mean, std = values[f"{which}_return_mean"], values[f"{which}_return_std"]
    if not np.isfinite(mean):
        return f"{'-':>{width}}" + " " * (std_width + 4 if width else 0)
    return f"{mean:{width}.2f} +- {std:{std_width}.2f}"


def _unended(summary: dict) -> bool:
    """Whether a point's training return is NaN with seeds still finite (no divergence)."""
    points = summary["points"]
    return any(not np.isfinite(p["final_return_mean"]) and p["finite_seeds"] for p in points)


def bootstrap_band(values: Any, level: float = 0.95, samples: int = 1000) -> tuple:
    """Mean over seeds (axis 0) and a percentile bootstrap confidence band, NaNs ignored."""
    values = np.asarray(values, float)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, values.shape[0], size=(samples, values.shape[0]))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[picks], axis=1)
        low, high = np.nanpercentile(means, [50 * (1 - level), 50 * (1 + level)], axis=0)
        return np.nanmean(values, axis=0), low, high


def plot_learning_curves(
    path: Path, batch: Batch, env_steps: list[int], metrics: dict, title: str
) -> None:
    """Training and eval return against env steps: mean and 95% bootstrap band over seeds,
    one line per sweep point."""
    import matplotlib.pyplot as plt

    fig = learning_curve_figure(batch, env_steps, metrics, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())


def short_number(x: float, _: Any = None) -> str:
    """A tick label that stays short: 0, 500, 25k, 1.5M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"


def learning_curve_figure(batch: Batch, env_steps: list[int], metrics: dict, title: str) -> Any:
    """The figure `plot_learning_curves` saves. Points are marked when there are few (a run
    with one or two evaluations still shows them), the x axis starts at 0, and env-step tick
    labels are short (25k, 1.5M) so they never overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    marker = "o" if len(env_steps) <= 25 else None
    train, evals = metrics["train"]["episodic_return"], metrics["eval"]["episodic_return"]
    if not batch.sweep:
        train, evals = train[None], evals[None]
    names = [", ".join(f"{k}={v:g}" for k, v in values.items()) for values in batch.points]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, group, curves in zip(axes, ("train", "eval"), (train, evals), strict=True):
        for name, curve in zip(names, curves, strict=True):
            mean, low, high = bootstrap_band(curve)
            (line,) = ax.plot(env_steps, mean, label=name, marker=marker, markersize=4)
            ax.fill_between(env_steps, low, high, color=line.get_color(), alpha=0.25)
        ax.set_title(f"{'training' if group == 'train' else 'evaluation'} return")
        ax.set_xlabel("env steps (per seed)")
        ax.set_xlim(0, max(env_steps) * 1.04)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(FuncFormatter(short_number))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episodic return")
    if len(names) > 1:
        axes[1].legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
