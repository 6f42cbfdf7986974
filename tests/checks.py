"""Checks shared by the per-algorithm test files."""

import importlib
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from canter.algorithms import evaluate
from canter.common.run import checkpoint
from PIL import Image


def assert_evaluates_and_renders(run_dir: Path, gif: Path, entries: int) -> None:
    """`evaluate.py RUN --episodes 3 --gif GIF --gif-steps 20` works on a run: one finite mean
    return per entry, and a GIF of at most the first 20 steps of the last entry's greedy
    episode (the first frame is the reset's)."""
    result = evaluate.main(run_dir, episodes=3, gif=gif, gif_entry=entries - 1, gif_steps=20)
    assert len(result["returns"]) == entries
    assert all(math.isfinite(r) for r in result["returns"]), result
    assert gif.read_bytes().startswith(b"GIF8")
    with Image.open(gif) as image:
        assert 1 <= image.n_frames <= 21, image.n_frames


def cli_in_process(algo: str, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`algorithms/<algo>.py ARGS` run in the test's process: (exit code, stdout, stderr). The
    same `main` as a subprocess runs, without an interpreter's start (15-20 s on 2 busy cores);
    for runs that end before compiling (bad input, --dry-run)."""
    from canter.algorithms import trainer

    module = importlib.import_module(f"canter.algorithms.{algo}")
    monkeypatch.setattr(sys, "argv", [f"{algo}.py", *args])
    with pytest.raises(SystemExit) as exited:
        trainer.cli(module.Config, module.make_train, getattr(module, "PRESETS", None))
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


def assert_refused_before_compiling(
    algo: str, args: list, needles: list, tmp_path: Path, monkeypatch, capsys, by_subprocess: bool
) -> None:
    """`algorithms/<algo>.py ARGS --run-dir DIR` exits 2 with every needle in its stderr and
    writes nothing: by subprocess (the exit code end to end, no traceback) or in-process."""
    run_dir = ["--run-dir", str(tmp_path / "run")]
    if by_subprocess:
        script = Path(__file__).resolve().parent.parent / "algorithms" / f"{algo}.py"
        command = [sys.executable, str(script), *args, *run_dir]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        code, err = done.returncode, done.stderr
        assert "Traceback" not in err
    else:
        code, _, err = cli_in_process(algo, monkeypatch, capsys, *args, *run_dir)
    assert code == 2, err
    assert all(needle in err for needle in needles), err
    assert not (tmp_path / "run").exists()


def kill_after_checkpoint(victim: subprocess.Popen, run_dir: Path, interval: int) -> int:
    """SIGKILL a CLI run once its checkpoint holds `interval` or more; the interval saved."""
    deadline, saved = time.time() + 600, 0
    while time.time() < deadline and victim.poll() is None:
        if (run_dir / "checkpoint.eqx").exists():
            saved = checkpoint.read_header(run_dir / "checkpoint.eqx")[0]["interval"]
            if saved >= interval:
                break
        time.sleep(0.02)
    assert victim.poll() is None, "the run finished before it could be killed"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    return saved
