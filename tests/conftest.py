import pytest

from common.envs import register_env
from tests.probes import PROBES

for probe in PROBES:
    register_env(probe.__name__, lambda probe=probe: (probe(), probe().default_params))


@pytest.fixture(scope="session")
def repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent
