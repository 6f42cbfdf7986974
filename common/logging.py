"""Host-side output: atomic file writes and per-seed metric tables."""

import csv
import io
import json
import math
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader (or a crash) sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    """Atomically write `data` as indented JSON (NaN becomes null)."""
    atomic_write(path, json.dumps(_finite(data), indent=2) + "\n")


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Atomically write a list of flat dicts (all with the same keys) as CSV."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, buffer.getvalue())


def _finite(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


class MetricsLog:
    """Host-side sinks for one run: a CSV per (sweep point, seed), TensorBoard and W&B optional.

    `labels` name the batch entries (`seed_3`, or `point_1/seed_3` in a sweep). CSV rows are
    appended and flushed after every interval; on resume the files are first rewritten
    (atomically) from the checkpoint's history, so they continue without gaps or duplicates.
    """

    def __init__(self, run_dir: Path, labels: list[str], track: tuple[str, ...], config: dict):
        self.run_dir, self.labels = run_dir, labels
        self.writers: list[Any] = []
        self.wandb: Any = None
        if "tensorboard" in track:
            from tensorboardX import SummaryWriter

            self.writers = [SummaryWriter(str(run_dir / "tensorboard" / lab)) for lab in labels]
        if "wandb" in track:
            import wandb

            self.wandb = wandb.init(
                project="canter", name=run_dir.name, dir=str(run_dir), config=config
            )

    def csv_path(self, label: str) -> Path:
        return self.run_dir / label / "metrics.csv"

    def restore(self, rows: list[list[dict[str, Any]]]) -> None:
        """Rewrite every CSV with `rows[b]`, the rows of batch entry b up to the checkpoint."""
        for label, entry_rows in zip(self.labels, rows, strict=True):
            if entry_rows:
                write_csv(self.csv_path(label), entry_rows)
            else:  # a fresh run: no rows yet, and none left over from an earlier run here
                self.csv_path(label).unlink(missing_ok=True)

    def log(self, rows: list[dict[str, Any]]) -> None:
        """Append one row (one interval) per batch entry, and forward to the trackers."""
        for b, (label, row) in enumerate(zip(self.labels, rows, strict=True)):
            path = self.csv_path(label)
            new = not path.exists()
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(row))
                if new:
                    writer.writeheader()
                writer.writerow(row)
            for name, value in row.items():
                if self.writers and "/" in name:
                    self.writers[b].add_scalar(name, value, row["env_steps"])
            if self.writers:
                self.writers[b].flush()
        if self.wandb is not None:
            step = rows[0]["env_steps"]
            flat = {
                f"{lab}/{k}": v
                for lab, r in zip(self.labels, rows, strict=True)
                for k, v in r.items()
                if "/" in k
            }
            self.wandb.log(flat, step=step)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.wandb is not None:
            self.wandb.finish()


def bootstrap_band(values: Any, level: float = 0.95, samples: int = 1000) -> tuple:
    """Mean over seeds (axis 0) and a percentile bootstrap confidence band, NaNs ignored."""
    import numpy as np

    values = np.asarray(values, float)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, values.shape[0], size=(samples, values.shape[0]))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[picks], axis=1)
        low, high = np.nanpercentile(means, [50 * (1 - level), 50 * (1 + level)], axis=0)
        return np.nanmean(values, axis=0), low, high


def plot_learning_curves(path: Path, env_steps: Any, curves: dict[str, dict[str, Any]], title: str):
    """Training and eval return against env steps: mean and 95% bootstrap band over seeds.

    `curves[name] = {"train": [seeds, intervals], "eval": [seeds, intervals]}`, one per point.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, group in zip(axes, ("train", "eval"), strict=True):
        for name, curve in curves.items():
            mean, low, high = bootstrap_band(curve[group])
            (line,) = ax.plot(env_steps, mean, label=name)
            ax.fill_between(env_steps, low, high, color=line.get_color(), alpha=0.25)
        ax.set_title(f"{'training' if group == 'train' else 'greedy evaluation'} return")
        ax.set_xlabel("env steps (per seed)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episodic return")
    if len(curves) > 1:
        axes[1].legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(buffer.getvalue())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
