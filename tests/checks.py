"""Checks shared by the per-algorithm test files."""

import math
import signal
import subprocess
import time
from pathlib import Path

from canter.algorithms import evaluate
from canter.common.run import checkpoint


def assert_evaluates_and_renders(run_dir: Path, gif: Path, entries: int) -> None:
    """`evaluate.py RUN --episodes 3 --gif GIF` works on a run: one finite mean return per
    entry, and a GIF of the last entry's greedy episode."""
    result = evaluate.main(run_dir, episodes=3, gif=gif, gif_entry=entries - 1)
    assert len(result["returns"]) == entries
    assert all(math.isfinite(r) for r in result["returns"]), result
    assert gif.read_bytes().startswith(b"GIF8")


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
