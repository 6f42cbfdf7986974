"""Checks shared by the per-algorithm test files."""

import contextlib
import fcntl
import importlib
import importlib.util
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
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
    same `main` as a subprocess runs, without an interpreter's start (5-20 s on 2 busy cores);
    for runs that end before compiling (bad input, --dry-run, --help)."""
    from canter.algorithms import trainer

    module = importlib.import_module(f"canter.algorithms.{algo}")
    monkeypatch.setattr(sys, "argv", [f"{algo}.py", *args])
    try:  # a run that ends well returns (as --dry-run does); the others exit with their code
        trainer.cli(module.Config, module.make_train, getattr(module, "PRESETS", None))
        code = 0
    except SystemExit as exited:
        code = exited.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_run(algo: str, monkeypatch, capsys, *args: str) -> subprocess.CompletedProcess:
    """`algorithms/<algo>.py ARGS` in the test's process, as a finished subprocess would report
    it: a training run through the CLI's `main` without an interpreter's start (tests/test_cli.py
    runs the file as a process, the exit code and output end to end)."""
    code, out, err = cli_in_process(algo, monkeypatch, capsys, *args)
    return subprocess.CompletedProcess([f"{algo}.py", *args], code, out, err)


def assert_refused_before_compiling(
    algo: str, args: list, needles: list, tmp_path: Path, monkeypatch, capsys
) -> None:
    """`algorithms/<algo>.py ARGS --run-dir DIR`, in-process, exits 2 with every needle in its
    stderr and writes nothing (tests/test_cli.py runs one refusal by subprocess, for the exit
    code end to end and no traceback)."""
    run_dir = ["--run-dir", str(tmp_path / "run")]
    code, out, err = cli_in_process(algo, monkeypatch, capsys, *args, *run_dir)
    assert code == 2, err
    assert all(needle in err for needle in needles), err
    assert "compiled" not in out
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
    victim.wait(timeout=60)
    return saved


def training_env(**more: str) -> dict[str, str]:
    """The environment for a subprocess whose time goes to training rather than compiling:
    XLA:CPU's fusion emitters back on. tests/conftest.py turns them off for the default and slow
    tiers, which compiles faster but ran PPO's CartPole training 1.8 times slower."""
    flags = os.environ.get("XLA_FLAGS", "").replace("--xla_cpu_use_fusion_emitters=false", "")
    return {**os.environ, "XLA_FLAGS": " ".join(flags.split()), **more}


def needs(module: str, extra: str) -> pytest.MarkDecorator:
    """Skip the test where `module` is not installed, naming the extra that installs it."""
    missing = importlib.util.find_spec(module) is None
    return pytest.mark.skipif(missing, reason=f"the {extra} extra: pip install -e '.[{extra}]'")


def two_processes(repo_root: Path, script: str, *args: str, attempts: int = 3) -> list[str]:
    """Run `python -c script PORT PROCESS_ID *args` as processes 0 and 1 of a two-process JAX
    run on a free localhost port; each one's stdout. The port is free when chosen but may be
    taken before the coordinator binds it: that failure alone is retried on a new port."""
    for attempt in range(attempts):
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            port = probe.getsockname()[1]
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(port), str(i), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=repo_root,
            )
            for i in range(2)
        ]
        outputs = [worker.communicate(timeout=600) for worker in workers]
        errors = " ".join(err for _, err in outputs).lower()
        taken = "address already in use" in errors or "failed to add port" in errors
        if taken and attempt + 1 < attempts:
            continue
        codes = [worker.returncode for worker in workers]
        assert codes == [0, 0], "\n".join(
            f"process {i}: {err[-2000:]}" for i, (_, err) in enumerate(outputs)
        )
        return [out for out, _ in outputs]
    raise AssertionError("unreachable")


@contextlib.contextmanager
def algorithms_folder(exclusive: bool = False) -> Iterator[None]:
    """A lock on algorithms/ across the test session's processes: shared by tests that read
    every file there, exclusive for a test that adds a file and removes it (tests/test_fork.py)."""
    with open(Path(tempfile.gettempdir()) / "canter-tests-algorithms.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def assert_episodes_read_and_cleared(state: Any, metrics: dict) -> None:
    """The episodes each iteration ended were counted, and the record `ended_episodes` cleared
    was carried on in the state: a run that ended some leaves none uncounted behind."""
    assert np.nansum(np.asarray(metrics["train"]["episodes"])) > 0  # else nothing to check
    assert not np.any(np.asarray(state.env_state.ended)), np.asarray(state.env_state.ended)


def drawn_frames(name: str, seeds: int = 2, steps: int = 1) -> list[np.ndarray]:
    """An env's own frames (`frames(states)`, what evaluate.py's GIF draws) of `steps` states
    from each of `seeds` resets (the first action each step), checked to be drawn: RGB images,
    none of a few colours, and not all equal (an empty axes or a blank canvas is the same image
    whatever the state)."""
    from canter.common.envs import base_state, make_env

    env, params = make_env(name)
    states = []
    for seed in range(seeds):
        _, state = env.reset(jax.random.key(seed), params)
        for step in range(steps):
            states.append(base_state(state))
            _, state, *_ = env.step(jax.random.key(step), state, 0, params)
    frames = env.unwrapped.frames(states)
    assert len(frames) == len(states)
    for frame in frames:
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3, frame.shape
        assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 4, "a frame of one or two colours"
    assert any(not np.array_equal(frames[0], f) for f in frames[1:]), "every state drew alike"
    return frames


def assert_resume_equals_whole_run(config: Any, make_train: Any, algo: str, run_dir: Path) -> None:
    """A run stopped after its first interval and resumed from its checkpoint ends as the
    uninterrupted run of `config` does, bit for bit: every metric and every state array (keys
    by their bits)."""
    import equinox as eqx
    from canter.algorithms import trainer

    def run(**kwargs: Any) -> Any:
        return trainer.run(config, make_train, algo=algo, verbose=False, **kwargs)

    def data(x: Any) -> Any:
        return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    whole = run()
    first = run(run_dir=run_dir, checkpoint_every=1, stop_after=1)
    assert first.summary["intervals"] == 1
    resumed = run(run_dir=run_dir, resume=True)
    assert resumed.summary["complete"]
    for group in ("train", "eval"):
        for name, value in whole.metrics[group].items():
            np.testing.assert_array_equal(resumed.metrics[group][name], value, err_msg=name)
    leaves = [jax.tree.leaves(eqx.filter(r.state, eqx.is_array)) for r in (resumed, whole)]
    for a, b in zip(*leaves, strict=True):
        np.testing.assert_array_equal(data(a), data(b))


def with_start(train: Any) -> Any:
    """`train`'s whole run, returning its initial state too, `key -> (start, (state,
    metrics))`: the run starts from that state, so init is computed once (a second `start` in
    the program doubled ppo_rnd's compile, 10 -> 19 s, where an eager one took as long)."""
    import dataclasses

    def run(key: Any) -> Any:
        start, _ = train.start(key)
        return start, dataclasses.replace(train, init=lambda _: start)(key)

    return run
