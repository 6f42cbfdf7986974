import os
import shutil
import sys
import tempfile
from pathlib import Path

# Bytecode caches on, for this process, its xdist workers and every CLI subprocess a test starts,
# where the environment turned them off (PYTHONDONTWRITEBYTECODE, as on this project's development
# machine): without them each new interpreter compiles the source of every module it imports
# (jax, gymnax's seaborn and pandas, distrax's TFP) again, 11 of the 16.6 s that a CLI refusing
# bad input took here. With them it takes 5.4 s. They change no test's meaning: Python checks
# each cache against its source's modification time and size.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import jax  # noqa: E402
import pytest  # noqa: E402
from canter.common.run.devices import use_cpu_cores  # noqa: E402

# One CPU device per core, as a run started from the CLI gets (common/run/devices.py): seeds of a
# vmapped run train in parallel. Before anything (gymnax included) starts JAX's backend.
use_cpu_cores()

from canter.common.envs import register_env  # noqa: E402

from tests.probes import PROBES  # noqa: E402

# XLA:CPU's intra-op thread pool off: on 2 cores, single-threaded Eigen compiled the PPO step
# in 2.9 s instead of 4.2 s and ran as fast. Set before the first computation; CLI subprocesses
# inherit it. (The hangs once blamed on it came from async dispatch: see common/run/devices.py.)
if "intra_op_parallelism_threads" not in os.environ.get("XLA_FLAGS", ""):
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()

# Many tests compile the same small programs (in-process and in CLI subprocesses, which inherit
# the environment): a persistent compilation cache for this session compiles each only once.
# Nothing is timed or counted through compilation, so the cache changes no test's meaning.
# The process that makes it (the xdist controller, or a lone pytest) removes it at the end; the
# workers and CLI subprocesses find it in the environment.
_own_cache = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _own_cache:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="canter-test-jax-cache-")
_cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

for probe in PROBES:
    register_env(probe.__name__, lambda probe=probe: (probe(), probe().default_params))


def pytest_unconfigure(config):
    if _own_cache:
        shutil.rmtree(_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def repo_root():
    return Path(__file__).resolve().parent.parent


# --- order: the costliest files first
#
# The tiers run on one pytest-xdist worker per core with `--dist loadfile` (pyproject.toml): a
# file's tests stay on one worker, so a module's fixture (a compiled vmapped run, say) is
# computed once, not once per worker, and its programs are compiled once. Files go to the
# workers in collection order, each to the first that is free: the longest first, so that no
# worker ends alone on a long file (longest-processing-time-first). A file's cost is the sum of
# its tests' estimates: worker seconds measured in whole runs of each tier on 2 busy cores
# (2026-11-29), rounded to 5 s, for the tests of 30 s or more; any other learning test counts
# 100 s, any other slow test 20 s, a default-tier test 2 s. Only the order changes, never what
# runs; tests keep their order within a file.
ESTIMATES = {
    "test_craftax.py::test_ppo_learns": 280,
    "test_gpu_script.py::test_tiny_run": 250,
    "test_physics.py::test_the_speed_benchmark": 200,
    "test_ppo_rnn.py::test_memory_beats": 195,
    "test_ppo_continuous.py::test_pendulum_reaches_target": 190,
    "test_data_parallel.py::test_one_seed_split_over_devices_equals_one_device": 175,
    "test_ppo_rnn.py::test_cartpole_reaches": 175,
    "test_physics.py::test_ppo_continuous_balances": 175,
    "test_sac.py::test_sac_pendulum": 165,
    "test_physics.py::test_sac_trains_resumes_and_draws": 155,
    "test_jumanji.py::test_ppo_with_masks": 155,
    "test_pqn.py::test_pqn_cartpole_reaches_reference_return": 150,
    "test_run_management.py::test_saved_on_two_devices": 145,
    "test_readme.py::test_readme_commands_run[block1-part0]": 140,
    "test_run_management.py::test_multihost": 120,
    "test_atari.py::test_ppo_atari_trains": 115,
    "test_td3.py::test_td3_pendulum": 110,
    "test_minatar.py::test_ppo_learns_breakout_minatar": 110,
    "test_dqn.py::test_dqn_cartpole_reaches": 100,
    "test_learning.py::test_ppo_cartpole": 100,
    "test_data_parallel.py::test_data_parallel_across_two_processes": 85,
    "test_readme.py::test_readme_python_snippet_runs": 75,
    "test_host.py::test_mujoco_halfcheetah": 70,
    "test_craftax.py::test_the_speed_benchmark": 70,
    "test_host.py::test_a_mujoco_gif": 65,
    "test_robustness.py::test_debug_cli": 60,
    "test_run_management.py::test_train_longer": 60,
    "test_craftax.py::test_refill_gives_a_new_spare": 55,
    "test_minatar.py::test_cnn_variant_runs_vmapped": 55,
    "test_fork.py::test_a_fork_inside": 55,
    "test_ppo_rnn.py::test_cli_smoke_run": 55,
    "test_run_management.py::test_sigkill_then_resume": 50,
    "test_run_management.py::test_resumed_on_the_device_count": 50,
    "test_minatar.py::test_cli_minatar_preset": 50,
    "test_robustness.py::test_debug_runs_eagerly": 45,
    "test_robustness.py::test_a_second_signal": 45,
    "test_robustness.py::test_a_signal_checkpoints": 50,
    "test_ppo_continuous.py::test_cli_smoke_run": 45,
    "test_host.py::test_sac_on_a_box": 45,
    "test_cli.py::test_two_processes_started_together": 40,
    "test_td3.py::test_cli_smoke_run": 40,
    "test_physics.py::test_spaces_and_a_gymnax_step[playground": 40,
    "test_robustness.py::test_a_diverged_sweep_point": 40,
    "test_dqn.py::test_cli_smoke_run": 35,
    "test_ppo_rnn.py::test_memory_probe": 35,
    "test_ppo_continuous.py::test_preset_sets_defaults": 35,
    "test_physics.py::test_every_env_of_a_batch": 35,
    "test_sac.py::test_cli_smoke_run": 35,
    "test_pqn.py::test_cli_smoke_run": 35,
    "test_run_management.py::test_sweep_compiles_once": 35,
    "test_benchmarks.py::test_speed_worker_measures": 35,
    "test_host.py::test_ppo_runs_vmapped_seeds": 35,
    "test_cli.py::test_smoke_run": 35,
    "test_ppo_rnn.py::test_every_state_leaf": 30,
    "test_sac.py::test_every_leaf": 25,
    "test_td3.py::test_every_leaf": 25,
    "test_pqn.py::test_every_leaf": 25,
    "test_invariants.py::test_every_state_leaf": 25,
}


def estimate(item: pytest.Item) -> float:
    name = item.nodeid.removeprefix("tests/")
    known = [s for prefix, s in ESTIMATES.items() if name.startswith(prefix)]
    if known:
        return known[0]
    marks = {m.name for m in item.iter_markers()}
    return 100 if "learning" in marks else 20 if "slow" in marks else 2


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` deselect: the costs are of what runs
def pytest_collection_modifyitems(config, items):
    cost: dict[str, float] = {}
    for item in items:
        cost[item.nodeid.split("::")[0]] = cost.get(item.nodeid.split("::")[0], 0) + estimate(item)
    # sorted() is stable: a file's tests keep their order.
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])
