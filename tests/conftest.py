import os
import tempfile
from pathlib import Path

import jax
import pytest
from canter.common.run.devices import use_cpu_cores

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
_cache = os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="canter-test-jax-cache-")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

for probe in PROBES:
    register_env(probe.__name__, lambda probe=probe: (probe(), probe().default_params))


@pytest.fixture(scope="session")
def repo_root():
    return Path(__file__).resolve().parent.parent
