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


# --- order: the longest tests first, on every xdist worker
#
# CI runs the whole suite in one session on two cores, with xdist's `worksteal` scheduling: each
# worker gets a contiguous share of the collection and, when done, takes half of another's queue
# from its end. A worker that meets a ten-minute test near the end of its share leaves the other
# idle, so the slow and learning tests go to the fronts of the shares, largest first, each to
# the share with the least estimated work; the rest keep their order (and their fixtures'
# locality) behind them. Estimates: worker seconds measured in a whole run on 2 busy cores
# (2026-11-28, 463 passed in 75 min 15 s), rounded to 5 s; any other learning test counts
# 100 s, any other slow test 30 s (most take 15-60 s). Only the order changes, never what runs,
# but a test that leans on a cache an earlier test filled now meets other neighbours
# (tests/test_host.py clears the env cache it needs empty).
ESTIMATES = {
    "test_gpu_script.py::test_tiny_run_writes": 500,  # every step since: 411 s alone
    "test_craftax.py::test_ppo_learns": 280,
    "test_physics.py::test_the_continuous_algorithms_train_resume_and_draw_on_playground[ppo": 260,
    "test_host.py::test_ppo_learns_gymnasium_cartpole": 245,
    "test_physics.py::test_sac_balances": 215,
    "test_ppo_rnn.py::test_memory_beats": 195,
    "test_data_parallel.py::test_one_seed_split_over_devices_equals_one_device[2-1": 190,
    "test_ppo_continuous.py::test_pendulum_reaches_target": 190,
    "test_gpu_script.py::test_the_suites_script_writes": 175,
    "test_physics.py::test_ppo_continuous_balances": 175,
    "test_physics.py::test_the_speed_benchmark": 175,
    "test_ppo_rnn.py::test_cartpole_reaches": 175,
    "test_sac.py::test_sac_pendulum": 165,
    "test_physics.py::test_the_continuous_algorithms_train_resume_and_draw_on_playground[sac": 160,
    "test_jumanji.py::test_ppo_with_masks": 155,
    "test_run_management.py::test_saved_on_two_devices": 155,
    "test_pqn.py::test_pqn_cartpole_reaches_reference_return": 150,
    "test_readme.py::test_readme_commands_run[block1-part0]": 145,
    "test_atari.py::test_ppo_atari_trains": 145,
    "test_run_management.py::test_multihost": 145,
    "test_craftax.py::test_the_speed_benchmark": 140,
    "test_host.py::test_sigkill_then_resume": 135,
    "test_data_parallel.py::test_one_seed_split_over_devices_equals_one_device[4-2": 115,
    "test_td3.py::test_td3_pendulum": 110,
    "test_minatar.py::test_ppo_learns_breakout_minatar": 110,
    "test_dqn.py::test_dqn_cartpole_reaches": 100,
    "test_readme.py::test_readme_commands_run[block1-part1]": 100,
    "test_readme.py::test_readme_commands_run[block1-part2]": 70,
    "test_readme.py::test_readme_commands_run[block1-part3]": 70,
}


def estimate(item: pytest.Item) -> float:
    name = item.nodeid.removeprefix("tests/")
    known = [s for prefix, s in ESTIMATES.items() if name.startswith(prefix)]
    if known:
        return known[0]
    marks = {m.name for m in item.iter_markers()}
    return 100 if "learning" in marks else 30 if "slow" in marks else 0


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` deselect: the shares are of what runs
def pytest_collection_modifyitems(config, items):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    # The shares' sizes, as worksteal cuts them: each idle worker gets pending // workers left.
    sizes, left = [], len(items)
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    heavy = sorted((i for i in items if estimate(i) > 0), key=estimate, reverse=True)
    fronts, work = [[] for _ in sizes], [0.0] * workers
    for item in heavy:
        open_shares = [w for w in range(workers) if len(fronts[w]) < sizes[w]]
        share = min(open_shares, key=lambda w: work[w])
        fronts[share].append(item)
        work[share] += estimate(item)
    chosen = {id(i) for i in heavy}
    rest = iter([i for i in items if id(i) not in chosen])
    items[:] = [
        item
        for front, size in zip(fronts, sizes, strict=True)
        for item in front + [next(rest) for _ in range(size - len(front))]
    ]
