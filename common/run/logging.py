"""Metric sinks of a run: a CSV per (sweep point, seed), TensorBoard and W&B optional."""

import csv
import io
from pathlib import Path
from typing import Any

from canter.common.run.files import atomic_write
from canter.common.run.rundir import RunDir


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Atomically write a list of flat dicts (all with the same keys) as CSV."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, buffer.getvalue())


class MetricsLog:
    """Host-side sinks for one run, one label per batch entry (`seed_3`, `point_1/seed_3`).

    CSV rows are appended and flushed after every call of the interval program; on resume the
    files are first rewritten (atomically) from the checkpoint's history, so they continue
    without gaps or duplicates.
    """

    def __init__(self, run_dir: RunDir, labels: list[str], track: tuple[str, ...], config: dict):
        self.run_dir, self.labels = run_dir, labels
        self.writers: list[Any] = []
        self.wandb: Any = None
        if "tensorboard" in track:
            from tensorboardX import SummaryWriter

            self.writers = [SummaryWriter(str(run_dir.tensorboard(lab))) for lab in labels]
        if "wandb" in track:
            import wandb

            self.wandb = wandb.init(
                project="canter", name=run_dir.path.name, dir=str(run_dir.path), config=config
            )

    def restore(self, rows: list[list[dict[str, Any]]]) -> None:
        """Rewrite every CSV with `rows[b]`, the rows of batch entry b up to the checkpoint."""
        for label, entry_rows in zip(self.labels, rows, strict=True):
            if entry_rows:
                write_csv(self.run_dir.metrics_csv(label), entry_rows)
            else:  # a fresh run: no rows yet, and none left over from an earlier run here
                self.run_dir.metrics_csv(label).unlink(missing_ok=True)

    def log(self, intervals: list[list[dict[str, Any]]]) -> None:
        """Append the rows of one or more intervals (each a row per batch entry), each CSV
        opened once, and forward them to the trackers."""
        for b, label in enumerate(self.labels):
            path = self.run_dir.metrics_csv(label)
            new = not path.exists()
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(intervals[0][b]))
                if new:
                    writer.writeheader()
                writer.writerows(rows[b] for rows in intervals)
            for row in (rows[b] for rows in intervals):
                for name, value in row.items():
                    if self.writers and "/" in name:
                        self.writers[b].add_scalar(name, value, row["env_steps"])
            if self.writers:
                self.writers[b].flush()
        if self.wandb is None:
            return
        for rows in intervals:
            flat = {
                f"{lab}/{k}": v
                for lab, r in zip(self.labels, rows, strict=True)
                for k, v in r.items()
                if "/" in k
            }
            self.wandb.log(flat, step=rows[0]["env_steps"])

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.wandb is not None:
            self.wandb.finish()
