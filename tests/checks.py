"""Checks shared by the per-algorithm test files."""

import math
from pathlib import Path

from algorithms import evaluate


def assert_evaluates_and_renders(run_dir: Path, gif: Path, entries: int) -> None:
    """`evaluate.py RUN --episodes 3 --gif GIF` works on a run: one finite mean return per
    entry, and a GIF of the last entry's greedy episode."""
    result = evaluate.main(run_dir, episodes=3, gif=gif, gif_entry=entries - 1)
    assert len(result["returns"]) == entries
    assert all(math.isfinite(r) for r in result["returns"]), result
    assert gif.read_bytes().startswith(b"GIF8")
