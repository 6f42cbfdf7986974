"""The run directory's layout, in one place: every file name, and the only reader of config.json.

    <run_dir>/config.json            algorithm, its source, sweep, every Config field (first)
    <run_dir>/checkpoint.eqx         the last checkpoint (common/run/checkpoint.py)
    <run_dir>/<label>/metrics.csv    one row per interval, per seed (and sweep point)
    <run_dir>/summary.json           final returns, timings (written at the end)
    <run_dir>/learning_curve.png     training and evaluation return against env steps
    <run_dir>/tensorboard/<label>/   with --track tensorboard; <run_dir>/wandb/ with wandb
    <run_dir>/run.lock               held (flock) by the process running it, while it runs

Two processes never run one directory: a new run creates config.json exclusively, and a run
(new or resumed) holds run.lock's lock while it runs, which the system drops when the process
ends, however it ends. A run removes run.lock as it ends (a killed one leaves it, unlocked). A
directory whose run ended before its first checkpoint (a second Ctrl-C, SIGKILL, a crash) holds
config.json without a checkpoint, and no process holds its lock: there is nothing to resume,
and a new run may take the directory, replacing that run's files.

config.json's `source` says where the algorithm's code is: `file`, the absolute path of the file
that defines `make_train`, and `module`, its importable name (`canter.algorithms.ppo`; None for
a script outside any package), so evaluate.py loads a fork wherever it lives.

config.json stores non-finite floats as the strings "inf", "-inf" and "nan" (strict JSON has
no such numbers) and tuples as lists; `config_record` gives that form, so a saved config and a
new one compare equal exactly when they describe the same run.
"""

import dataclasses
import fcntl
import inspect
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canter.common.config import ConfigError
from canter.common.run import checkpoint
from canter.common.run.files import atomic_write, write_json


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


# config.json's format: 2 since eval_every counts env steps (it counted iterations before); 3
# since the episode statistics count the episodes ended in each iteration (issue 43: the env
# state's fields differ, so a format-2 checkpoint does not load into this canter's state).
FORMAT = 3


def config_record(algo: str, config: Any, sweep: dict[str, list[float]]) -> dict[str, Any]:
    """What config.json holds for a run, in its JSON form."""
    record = {"algo": algo, "format": FORMAT, "sweep": sweep, **dataclasses.asdict(config)}
    return _encode(record)


def _check_format(path: Path, saved: dict[str, Any]) -> None:
    """Refuse to resume or evaluate a run written in another config.json format: its fields
    mean other things (format 1: eval_every counted iterations) and its checkpoint holds
    another state (format 2: the episode statistics' fields)."""
    if saved.get("format", 1) != FORMAT:
        raise ConfigError(
            f"{path} has config.json format {saved.get('format', 1)}, this canter writes "
            f"{FORMAT} (format 1 counted eval_every in iterations; 2 kept each env's last "
            "finished episode in its env state, where 3 counts the episodes ended since the "
            "last iteration): resume or evaluate it with the canter that made it, or start a "
            "new run."
        )


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


LOCK = "run.lock"


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is the one `path` names now (not unlinked, not replaced)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def run_name(env: str, algo: str, seed: int, stamp: str) -> str:
    """The default run directory's name, one folder whatever the env id holds:
    `gymnasium:ALE/Breakout-v5` becomes `gymnasium-ALE-Breakout-v5` (no `:`, `/` or spaces)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", env).strip("-.") or "env"
    return f"{safe}__{algo}__{seed}__{stamp}"


def new_run_dir(path: Path) -> Path:
    """Create `path`, or `path-2`, `path-3`... if it exists, by an atomic mkdir: two processes
    started in the same second get two directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise ConfigError(f"Could not create a new run directory next to {path}.")


class RunDir:
    """A run directory: where each of its files lives, and reading and writing its config."""

    def __init__(self, path: Path):
        self._lock: int | None = None  # run.lock's descriptor while this process holds it
        self.unlocked = False  # True where the filesystem has no flock
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
        """Whether a config.json here is not an abandoned run's (`abandoned`): a run with a
        checkpoint, one still running, or a config.json canter did not write."""
        return self.config_file.exists() and not self.abandoned()

    def abandoned(self) -> bool:
        """Whether this directory holds canter's config.json but no checkpoint, and no process
        runs it (its lock is free): a run that ended before saving anything."""
        if not self.config_file.exists() or self.checkpoint.exists():
            return False
        try:
            saved = json.loads(self.config_file.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(saved, dict) or not {"algo", "format"} <= saved.keys():
            return False  # not canter's config.json: never touched
        if self._lock is not None:  # this process holds the lock: no other runs it
            return True
        free = self._try_lock() and not self.unlocked
        if free:
            self.unlock()
        return free

    def lock(self) -> None:
        """Hold run.lock's lock until `unlock` or the process's end; ConfigError if another
        process holds it."""
        if self._lock is None and not self._try_lock():
            raise ConfigError(
                f"{self.path} is in use: another process is running it (it holds "
                f"{self.path / LOCK}); wait for it to end, or choose another --run-dir."
            )

    def _try_lock(self) -> bool:
        """Take run.lock's lock; False if another process holds it. A filesystem without
        flock (NFS with nolock, some FUSE mounts) runs unlocked, as canter did before: then
        nothing is taken for abandoned (`unlocked`).

        The lock is held on the file that run.lock names once it is taken: a holder unlinks
        run.lock (`unlock`) before it lets go, so a process that opened the file before the
        unlink and locks it after holds a file no longer in the directory; it lets go and
        tries again on the file run.lock names now (which a third process may hold)."""
        for _ in range(100):  # a retry needs another process's unlink between open and flock
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError:  # no flock here
                os.close(fd)
                self.unlocked = True
                return True
            if _same_file(fd, self.path / LOCK):
                self._lock = fd
                return True
            os.close(fd)  # run.lock was unlinked (and maybe made anew) after this opened it
        return False

    def unlock(self) -> None:
        """Let go of run.lock: unlinked while still held (see `_try_lock`), then closed."""
        if self._lock is not None:
            (self.path / LOCK).unlink(missing_ok=True)
            os.close(self._lock)  # closing the descriptor drops the lock
            self._lock = None

    def claim(self, record: dict[str, Any]) -> bool:
        """Make this directory this process's run: take its lock, then create config.json
        exclusively (O_EXCL), so that of two processes racing on one directory only one writes;
        the other gets a ConfigError. An abandoned run's files (`abandoned`) are removed first.
        Returns whether the directory was created here (for `release`)."""
        created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        self.lock()
        if self.abandoned():
            self._clear_abandoned()
        try:
            fd = os.open(self.config_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            self.unlock()
            raise ConfigError(
                f"{self.path} already holds a run; continue it with --resume {self.path}, or "
                "choose another --run-dir (nothing there was changed)."
            ) from None
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(record, indent=2) + "\n")
        return created

    def _clear_abandoned(self) -> None:
        """The files of a run that ended before its first checkpoint, this process holding the
        lock: the layout's files only (anything else in the directory stays)."""
        for name in ("config.json", "summary.json", "learning_curve.png"):
            (self.path / name).unlink(missing_ok=True)
        for name in ("tensorboard", "wandb"):
            shutil.rmtree(self.path / name, ignore_errors=True)
        for sub in self.path.iterdir():
            if sub.is_dir() and [p.name for p in sub.iterdir()] == ["metrics.csv"]:
                shutil.rmtree(sub)

    def release(self, created: bool) -> None:
        """Undo `claim` when nothing was trained: config.json and the lock file go, and the
        directory too if it was created by the claim and is empty."""
        self.config_file.unlink(missing_ok=True)
        self.unlock()  # run.lock goes too
        if created:
            try:
                self.path.rmdir()
            except OSError:
                pass

    def check_resume(
        self, record: dict[str, Any], longer: Callable[[dict], str | None] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """(intervals done, saved record) of the checkpoint, after refusing (before anything
        compiles) a `record` (`config_record`) that differs from the saved one, naming each
        field. A larger total_timesteps alone is allowed where `longer(saved)` gives no reason
        against it."""
        if self.abandoned():
            raise ConfigError(
                f"{self.path} holds no checkpoint: its run stopped before saving its first, so "
                f"there is nothing to resume; start it again with --run-dir {self.path} (and "
                "without --resume): the directory is reused."
            )
        if self.config_file.exists() and not self.checkpoint.exists():
            raise ConfigError(
                f"{self.path} holds no checkpoint: another process is running it (it holds "
                f"{self.path / LOCK}; resume it once that process has stopped), or its "
                "config.json is not one canter wrote."
            )
        header, _ = checkpoint.read_header(self.checkpoint)
        saved = header.get("config") or {}
        _check_format(self.path, saved)
        fields = sorted(k for k in record.keys() | saved.keys() if record.get(k) != saved.get(k))
        if fields == ["total_timesteps"]:
            was, now = saved["total_timesteps"], record["total_timesteps"]
            why = "a run cannot be shortened; start a new run instead" if now < was else None
            if now > was:
                why = longer(saved) if longer is not None else "not supported here"
            if why:
                raise ConfigError(
                    f"--resume {self.path}: continuing its --total-timesteps {was} to {now} is "
                    f"refused: {why}."
                )
        elif fields:
            diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {record.get(k)!r}" for k in fields)
            raise checkpoint.CheckpointError(
                f"The checkpoint at {self.checkpoint} has a different config: {diffs}."
            )
        return header["interval"], saved

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
        _check_format(self.path, saved)  # an older format's checkpoint has another state
        saved_algo, sweep = saved.pop("algo", None), saved.pop("sweep", {})
        for written in ("format", "source", "extended"):  # what the runner adds to the record
            saved.pop(written, None)
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
