"""The memory a run needs, estimated before compiling (common/run/memory.py): what it counts, that
it grows with the seeds, and the refusal that names how many seeds fit."""

import dataclasses
import re
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import pytest
from canter.algorithms import ppo
from canter.common.config import ConfigError
from canter.common.run import memory
from canter.common.run.batch import make_batch

from tests.checks import cli_in_process

TINY = ppo.Config(
    total_timesteps=4 * 16 * 4,
    num_envs=4,
    num_steps=16,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 16 * 2,
    num_eval_envs=2,
)


def test_the_estimate_counts_the_rollout_and_grows_with_the_seeds(monkeypatch):
    train = ppo.make_train(TINY)
    need = memory.estimate(train)
    # More than the state (whose output takes over its input's buffers): the rollout, the
    # update's minibatches, gradients and optimiser temporaries (here 0.21 against 0.11 MiB).
    assert need.program > 1.5 * need.state > 0
    assert need.per_seed == need.program + need.copies * need.state
    # Eight times the rollout (obs 4 floats, and more per transition) adds at least its obs.
    eight = dataclasses.replace(TINY, num_steps=128, total_timesteps=1024, eval_every=512)
    longer = memory.estimate(ppo.make_train(eight))
    assert longer.program - need.program >= (128 - 16) * 4 * 4 * 4
    assert longer.state == need.state  # the state holds no rollout
    # A memory of four seeds' estimate holds four seeds, not five: the check is per seed.
    monkeypatch.setattr(memory, "estimate", lambda _: need)  # traced once above
    monkeypatch.setattr(memory, "memory_bytes", lambda: (4 * need.per_seed, "a test device"))
    line = memory.check(train, make_batch(dataclasses.replace(TINY, num_seeds=4), None))
    assert line.startswith("memory: about") and "for 4 seeds (100.0% of a test device" in line
    with pytest.raises(ConfigError, match="5 seeds need about .* At most 4 seeds fit"):
        memory.check(train, make_batch(dataclasses.replace(TINY, num_seeds=5), None))
    points = {"learning_rate": [1e-3, 1e-4, 3e-4]}
    sweep = make_batch(dataclasses.replace(TINY, num_seeds=2), points)
    with pytest.raises(ConfigError, match="with 3 points, --num-seeds 1 or fewer"):
        memory.check(train, sweep)


def test_100000_cartpole_seeds_are_refused_naming_how_many_fit(monkeypatch, capsys, tmp_path):
    # As on the 2-core development machine (24 GiB), wherever the test runs.
    machine = (24 * 2**30, "this machine's memory (CPU)")
    monkeypatch.setattr(memory, "memory_bytes", lambda: machine)
    run_dir = ["--run-dir", str(tmp_path / "r")]
    tic = time.perf_counter()
    code, out, err = cli_in_process("ppo", monkeypatch, capsys, "--num-seeds", "100000", *run_dir)
    assert code == 2 and err.count("\n") == 1 and "compiled" not in out, err
    assert err.startswith("error: 100,000 seeds need about") and "(24.0 GiB)" in err, err
    fits = int(
        re.search(r"At most ([\d,]+) seeds fit in one program", err).group(1).replace(",", "")
    )
    assert 10_000 < fits < 100_000 and f"--num-seeds {fits} or fewer" in err, err
    assert not (tmp_path / "r").exists() and time.perf_counter() - tic < 60  # traced only
    code, out, err = cli_in_process(
        "ppo", monkeypatch, capsys, "--num-seeds", str(fits), "--dry-run"
    )
    assert code == 0 and f"memory: about 24.0 GiB for {fits:,} seeds" in out, (out, err)


@pytest.mark.slow  # compiles one seed's interval for XLA's own figure (5-10 s on 2 busy cores)
def test_the_estimate_is_near_xlas_own_figure():
    train = ppo.make_train(TINY)
    need = memory.estimate(train)
    state, key = jax.eval_shape(train.start, jax.random.key(0))
    index = jax.ShapeDtypeStruct((), jnp.int32)
    compiled = jax.jit(train.interval, donate_argnums=0).lower(state, key, index).compile()
    xla = compiled.memory_analysis()
    held = xla.argument_size_in_bytes + xla.temp_size_in_bytes
    held += xla.output_size_in_bytes - xla.alias_size_in_bytes
    assert 0.7 < need.program / held < 1.4, (need, xla)


@pytest.mark.slow  # a fresh interpreter: the exit code end to end, on this machine's memory
def test_a_run_of_100000_seeds_is_refused_before_compiling(repo_root, tmp_path):
    from canter.common.run.devices import memory_bytes

    need = memory.estimate(ppo.make_train(ppo.Config())).per_seed * 100_000
    if need <= memory_bytes()[0]:
        pytest.skip(f"this machine holds 100,000 PPO CartPole seeds ({need / 2**30:.0f} GiB)")
    script = repo_root / "algorithms" / "ppo.py"
    command = [
        sys.executable,
        str(script),
        "--num-seeds",
        "100000",
        "--run-dir",
        str(tmp_path / "r"),
    ]
    tic = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.startswith("error: 100,000 seeds need about") and "Traceback" not in done.stderr
    )
    assert "seeds fit in one program" in done.stderr and "compil" not in done.stdout
    assert time.perf_counter() - tic < 120 and not (tmp_path / "r").exists()
