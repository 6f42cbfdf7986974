"""make_env validation, flattening and the fixed-shape episode statistics."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo, ppo_continuous
from canter.common.config import ConfigError
from canter.common.envs import ActionSpaceError, action_kind, env_names, make_env
from canter.common.envs.wrappers import ended_episodes
from canter.common.run.batch import make_batch
from canter.common.run.cli import house_hint


def test_unknown_env_lists_valid_names():
    with pytest.raises(ConfigError) as error:
        make_env("CartPole-v9")
    message = str(error.value)
    assert "CartPole-v9" in message and "CartPole-v1" in message and "Breakout-MinAtar" in message
    assert set(env_names()) >= {"CartPole-v1", "Pendulum-v1", "ProbeConstant"}


def test_a_name_of_another_family_says_so_first():
    with pytest.raises(ConfigError) as error:
        make_env("HalfCheetah-v5")
    assert (
        str(error.value) == "HalfCheetah-v5 is a Gymnasium env: use --env gymnasium:HalfCheetah-v5."
    )
    with pytest.raises(
        ConfigError, match="^ALE/Pong-v5 is a Gymnasium env: use --env gymnasium:ALE"
    ):
        make_env("ALE/Pong-v5")
    with pytest.raises(ConfigError, match="^Breakout-MinAtar is a gymnax env: use --env Breakout-"):
        make_env("gymnasium:Breakout-MinAtar")


def test_help_names_every_env_family():
    ppo = Path(__file__).resolve().parent.parent / "algorithms" / "ppo.py"
    done = subprocess.run(
        [sys.executable, str(ppo), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        # One column of panels: at 200 columns tyro sets the run options' panel beside the
        # config's, and their lines interleave.
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    help_text = " ".join(done.stdout.replace("│", " ").split())
    env_help = help_text[help_text.index("--env STR") :][:400]
    for family in ("a gymnax id", "registered name", "register_env", "`gymnasium:<id>`"):
        assert family in env_help, env_help


def test_action_kind_mismatch_names_the_kind():
    with pytest.raises(ConfigError, match="continuous action space"):
        make_env("Pendulum-v1", action="discrete", algorithm="ppo.py")
    with pytest.raises(ConfigError, match="discrete action space, but sac.py handles"):
        make_env("CartPole-v1", action="continuous", algorithm="sac.py")


def test_minatar_observations_are_flat():
    env, params = make_env("Breakout-MinAtar", action="discrete")
    assert env.observation_space(params).shape == (400,)
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (400,) and obs.dtype == jnp.float32
    obs, state, _, _, _, info = env.step(jax.random.key(1), state, 0, params)
    assert obs.shape == (400,) and info["final_observation"].shape == (400,)


def test_training_statistic_is_the_mean_over_the_episodes_ended_since_the_last_read():
    """A recount in plain Python over CartPole under random actions, 2 seeds x 3 envs, read
    every 7 steps: reads with no episode ended are NaN, and no seed sees another's episodes."""
    env, params = make_env("CartPole-v1")
    seeds, envs, reads, every = 2, 3, 12, 7
    step = jax.jit(jax.vmap(jax.vmap(env.step, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, None)))
    read = jax.jit(jax.vmap(ended_episodes))  # over seeds; each sums over its own envs
    keys = jax.random.split(jax.random.key(0), (seeds, envs))
    _, state = jax.vmap(jax.vmap(env.reset, in_axes=(0, None)), in_axes=(0, None))(keys, params)
    rng = np.random.default_rng(0)
    running = np.zeros((seeds, envs, 2))  # this episode's return and length so far
    empty_reads = 0
    for r in range(reads):
        ended = [[] for _ in range(seeds)]  # (return, length) of the episodes ended this read
        for t in range(every):
            keys = jax.random.split(jax.random.key(1000 * r + t), (seeds, envs))
            actions = jnp.asarray(rng.integers(0, 2, (seeds, envs)), jnp.int32)
            _, state, reward, terminated, truncated, _ = step(keys, state, actions, params)
            done = np.asarray(terminated | truncated)
            running += np.stack([np.asarray(reward), np.ones((seeds, envs))], axis=-1)
            for s, e in zip(*np.nonzero(done), strict=True):
                ended[s].append(tuple(running[s, e]))
                running[s, e] = 0.0
        metrics, state = read(state)
        for s in range(seeds):
            assert float(metrics["episodes"][s]) == len(ended[s])
            if not ended[s]:
                empty_reads += 1
                assert np.isnan(metrics["episodic_return"][s])
                assert np.isnan(metrics["episodic_length"][s])
                continue
            want_return, want_length = np.mean(ended[s], axis=0)
            assert float(metrics["episodic_return"][s]) == pytest.approx(want_return)
            assert float(metrics["episodic_length"][s]) == pytest.approx(want_length)
    assert 0 < empty_reads < seeds * reads  # both kinds of read happened
    np.testing.assert_array_equal(np.asarray(state.episode_length), running[..., 1])


def test_mnist_bandit_is_refused_clearly_and_not_listed():
    assert "MNISTBandit-bsuite" not in env_names()
    with pytest.raises(ConfigError, match="MNISTBandit-bsuite is not available: it downloads"):
        make_env("MNISTBandit-bsuite")


def test_the_house_list_names_each_files_action_space():
    import importlib

    from canter.algorithms import HOUSE, trainer

    files = {p.stem for p in Path(trainer.__file__).parent.glob("*.py")}
    assert set(HOUSE) <= files  # forks may sit beside them
    for name, kind in HOUSE.items():
        assert importlib.import_module(f"canter.algorithms.{name}").ACTION_SPACE == kind
    with pytest.raises(ActionSpaceError) as caught:
        make_env("CartPole-v1", action="continuous", algorithm="sac.py")
    assert caught.value.kind == "discrete"
    hint = house_hint(caught.value)
    assert "sac.py handles continuous actions only" in hint
    assert "algorithms/ppo_rnn.py" in hint and "algorithms/td3.py" not in hint
    assert "alphazero.py" not in hint  # pgx's board games only


@pytest.mark.parametrize("name", [n for n in env_names() if not n.startswith("Probe")])
@pytest.mark.slow  # 31 envs, 1-5 s each
def test_every_listed_env_traces_under_the_runner(name):
    # What the runner traces: start and one interval, vmapped over seeds, with float fields as
    # tracers (FourRooms-misc and MetaMaze-misc once died here building their env under trace).
    env, params = make_env(name)
    kind = action_kind(env, params)
    module = ppo if kind == "discrete" else ppo_continuous
    config = module.Config(
        env=name,
        num_envs=2,
        num_steps=4,
        num_minibatches=2,
        num_seeds=2,
        total_timesteps=8,
        eval_every=8,
        num_eval_envs=1,
    )
    configs, keys = make_batch(config).inputs()
    state, eval_keys = jax.eval_shape(
        jax.vmap(lambda c, k: module.make_train(c).start(k)), configs, keys
    )
    interval = jax.vmap(lambda c, s, k: module.make_train(c).interval(s, k, jnp.int32(0)))
    _, metrics = jax.eval_shape(interval, configs, state, eval_keys)
    assert metrics["eval"]["episodic_return"].shape == (2,)


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_an_env_whose_constructor_branches_on_arrays_trains(repo_root, tmp_path):
    command = [
        sys.executable,
        str(repo_root / "algorithms" / "ppo.py"),
        "--env",
        "FourRooms-misc",
        "--total-timesteps",
        "1024",
        "--eval-every",
        "512",
        "--num-eval-envs",
        "1",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done: return" in done.stdout


def test_importing_canter_leaves_jax_untouched():
    # No side effects on import: the CPU device split happens when a run starts.
    code = (
        "import jax, canter.common.blocks.buffer, canter.common.envs, canter.common.run.runner\n"
        "from canter.algorithms import dqn, ppo, ppo_continuous, ppo_rnn, pqn, sac, td3, trainer\n"
        "from jax._src import xla_bridge\n"
        "assert not xla_bridge.backends_are_initialized(), 'a backend was started on import'\n"
        "assert jax.config.jax_num_cpu_devices == -1, jax.config.jax_num_cpu_devices\n"
        # No suite's adapter or package either: each is imported when one of its envs is built.
        "import sys\n"
        "adapters = ('craftax', 'jumanji', 'minigrid', 'physics', 'host')\n"
        "loaded = [m for m in adapters if f'canter.common.envs.{m}' in sys.modules]\n"
        "loaded += [m for m in ('craftax', 'jumanji', 'xminigrid', 'brax') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "print('untouched')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "untouched" in done.stdout, done.stderr[-2000:]


def registry_imports(source: str) -> list[str]:
    """The imports in `source`, at any depth (inside functions too), that reach the registry:
    `canter.common.envs.registry`, or a name of the `canter.common.envs` package other than
    one of its modules (the package's `__init__` takes those from the registry)."""
    import ast

    registry = "canter.common.envs.registry"
    modules = {p.stem for p in Path(__file__).parents[1].glob("common/envs/*.py")} - {"registry"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == registry]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:  # `from .registry import ...`, `from . import ...`
                module = f"canter.common.envs.{module}".rstrip(".")
            if module == registry:
                found.append(registry)
            elif module == "canter.common.envs":
                found += [f"{module}.{a.name}" for a in node.names if a.name not in modules]
    return found


def test_no_adapter_imports_the_registry_and_the_suites_import_nothing(repo_root):
    """common/envs/: the registry imports the suites' adapters (when an env is built), never the
    other way, so the two form no import circle; what both need, each suite's names, prefix and
    install line, is in suites.py, which imports nothing."""
    import ast

    envs = repo_root / "common" / "envs"
    suites = ast.parse((envs / "suites.py").read_text())
    assert not [n for n in ast.walk(suites) if isinstance(n, ast.Import | ast.ImportFrom)]
    for path in sorted(envs.glob("*.py")):
        if path.name not in ("__init__.py", "registry.py"):
            assert registry_imports(path.read_text()) == [], path.name


def test_the_registry_import_check_catches_each_way_back():
    """The partner of the test above: each way an adapter could reach the registry is caught,
    a module of the package is not."""
    caught = [
        "from canter.common.envs.registry import CRAFTAX_GAMES",
        "def f():\n    from canter.common.envs.registry import env_names",
        "import canter.common.envs.registry",
        "from canter.common.envs import registry",
        "from canter.common.envs import make_env",
        "from .registry import env_names",
        "from . import registry",
    ]
    for source in caught:
        assert registry_imports(source), source
    assert registry_imports("from canter.common.envs import atari, suites, wrappers") == []
    assert registry_imports("from canter.common.envs.suites import HOST_PREFIX") == []
    assert registry_imports("from .suites import HOST_PREFIX\nfrom . import spares") == []


def test_the_log_extra_installs_tensorboard_which_opens_the_event_files(tmp_path):
    import tomllib

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["log"]
    names = {entry.split("[")[0].split(">")[0].split("=")[0].split("<")[0] for entry in extra}
    assert {"tensorboard", "tensorboardX"} <= names, extra  # the reader, and the writer canter uses
    pytest.importorskip("tensorboard", reason="the log extra: pip install -e '.[log]'")
    tensorboardX = pytest.importorskip("tensorboardX")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    writer = tensorboardX.SummaryWriter(str(tmp_path))
    writer.add_scalar("charts/episodic_return", 12.5, 3)
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    [scalar] = events.Scalars("charts/episodic_return")
    assert (scalar.step, scalar.value) == (3, 12.5)


DEFERRED_SCRIPT = """
import sys
from canter.common.envs import _Deferred, make_env
make_env("CartPole-v1")  # imports gymnax, and with it Pong's and Catch's modules
before = {name: type(sys.modules[name]) is _Deferred for name in ("seaborn", "matplotlib.pyplot")}
import matplotlib.pyplot as plt
import seaborn as sns
palette = sns.color_palette("cubehelix", 3)  # as gymnax's Pong draws
figure, _ = plt.subplots()
after = {name: type(sys.modules[name]) is _Deferred for name in ("seaborn", "matplotlib.pyplot")}
print(before, after, len(palette), type(figure).__name__)
"""


def test_gymnaxs_plotting_modules_are_imported_only_when_used():
    """common/envs/__init__.py: seaborn and pyplot stand deferred in sys.modules after gymnax is
    imported (2.3 s of every CLI start), and work as themselves once read."""
    done = subprocess.run(
        [sys.executable, "-c", DEFERRED_SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    deferred = "{'seaborn': True, 'matplotlib.pyplot': True}"
    loaded = "{'seaborn': False, 'matplotlib.pyplot': False}"
    assert done.stdout.split() == [*deferred.split(), *loaded.split(), "3", "Figure"], done.stdout
