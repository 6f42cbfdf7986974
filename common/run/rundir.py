"""The run directory's layout, in one place: every file name, and the only reader of config.json.

    <run_dir>/config.json            algorithm, its source, sweep, every Config field (first)
    <run_dir>/checkpoint.eqx         the last checkpoint (common/run/checkpoint.py)
    <run_dir>/<label>/metrics.csv    one row per interval, per seed (and sweep point)
    <run_dir>/summary.json           final returns, timings (written at the end)
    <run_dir>/learning_curve.png     training and evaluation return against env steps
    <run_dir>/tensorboard/<label>/   with --track tensorboard; <run_dir>/wandb/ with wandb

config.json's `source` says where the algorithm's code is: `file`, the absolute path of the file
that defines `make_train`, and `module`, its importable name (`canter.algorithms.ppo`; None for
a script outside any package), so evaluate.py loads a fork wherever it lives.

config.json stores non-finite floats as the strings "inf", "-inf" and "nan" (strict JSON has
no such numbers) and tuples as lists; `config_record` gives that form, so a saved config and a
new one compare equal exactly when they describe the same run.
"""

import dataclasses
import inspect
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canter.common.config import ConfigError
from canter.common.run.files import atomic_write, write_json


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def config_record(algo: str, config: Any, sweep: dict[str, list[float]]) -> dict[str, Any]:
    """What config.json holds for a run, in its JSON form."""
    return _encode({"algo": algo, "sweep": sweep, **dataclasses.asdict(config)})


def algorithm_source(make_train: Callable) -> dict[str, str | None]:
    """Where `make_train`'s code lives: its file, and its module name where it can be imported
    by one (a script run as `python path/to/file.py` is `__main__`: its package's name for it,
    when the file sits in canter's algorithms/ folder; None elsewhere)."""
    path = Path(inspect.getfile(make_train)).resolve()
    module = make_train.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else None
        house = Path(__file__).resolve().parents[2] / "algorithms"
        if module is None and path.parent == house:
            module = f"canter.algorithms.{path.stem}"
    return {"file": str(path), "module": module}


class RunDir:
    """A run directory: where each of its files lives, and reading and writing its config."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.config_file = self.path / "config.json"
        self.checkpoint = self.path / "checkpoint.eqx"
        self.summary = self.path / "summary.json"
        self.curve = self.path / "learning_curve.png"

    def metrics_csv(self, label: str) -> Path:
        return self.path / label / "metrics.csv"

    def tensorboard(self, label: str) -> Path:
        return self.path / "tensorboard" / label

    def holds_run(self) -> bool:
        return self.config_file.exists()

    def write_config(self, record: dict[str, Any]) -> None:
        atomic_write(self.config_file, json.dumps(record, indent=2) + "\n")

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.summary, summary)

    def read_config(self) -> dict[str, Any]:
        """The saved record (JSON form: lists, "inf" strings); ConfigError if there is none."""
        try:
            return json.loads(self.config_file.read_text())
        except (OSError, ValueError):
            raise ConfigError(
                f"{self.path} has no readable config.json: is it a run directory?"
            ) from None

    def load_config(self, config_cls: type, algo: str | None = None) -> tuple:
        """(algo, Config, sweep) of the saved run, read into `config_cls` (the algorithm's
        Config); with `algo` the run must be one of that algorithm's."""
        saved = self.read_config()
        saved_algo, sweep = saved.pop("algo", None), saved.pop("sweep", {})
        saved.pop("source", None)
        if algo is not None and saved_algo != algo:
            raise ConfigError(f"Cannot use {self.path} with {algo}.py: it is a {saved_algo} run.")
        fields = {f.name: f for f in dataclasses.fields(config_cls)}
        if set(saved) != set(fields):
            raise ConfigError(
                f"{self.path}/config.json does not match {saved_algo}'s Config (fields differ)."
            )
        values = {}
        for name, value in saved.items():
            default = fields[name].default
            if isinstance(default, tuple):
                value = tuple(value)
            elif isinstance(default, float) and value is not None:
                value = float(value)  # "inf" and friends, and ints written for floats
            values[name] = value
        return (
            saved_algo,
            config_cls(**values),
            {k: [float(v) for v in vs] for k, vs in sweep.items()},
        )
