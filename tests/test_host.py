"""Host environments (`gymnasium:<id>`, common/envs/host.py): gymnax 1.0 semantics, seeding,
refusals, and training through the runner."""

import csv
import dataclasses
import os
import shutil
import subprocess
import sys

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo, trainer
from canter.common.config import ConfigError
from canter.common.envs import make_env
from canter.common.envs.host import _seed
from canter.common.envs.registry import _build
from canter.common.run.evaluation import run_episodes

from tests.checks import cli_in_process

# CartPole cut at 12 steps: random actions cross terminations and truncations within a few dozen.
gymnasium.register(
    "canter-test/ShortCartPole-v0",
    "gymnasium.envs.classic_control:CartPoleEnv",
    max_episode_steps=12,
)


class DictObservation(gymnasium.Env):
    observation_space = gymnasium.spaces.Dict({"a": gymnasium.spaces.Discrete(2)})
    action_space = gymnasium.spaces.Discrete(2)


gymnasium.register("canter-test/DictObs-v0", DictObservation)


def reference(env_id: str, key_words: np.ndarray, actions: np.ndarray) -> dict:
    """A Gymnasium env stepped by hand, gymnax 1.0 style: at an episode's end the step returns
    the reset observation and keeps the last one as the final observation."""
    env = gymnasium.make(env_id)
    obs, _ = env.reset(seed=_seed(key_words))
    rows = {"first": obs, "obs": [], "reward": [], "terminated": [], "truncated": [], "final": []}
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(int(action))
        rows["final"].append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
        for name, value in zip(
            ("obs", "reward", "terminated", "truncated"),
            (obs, reward, terminated, truncated),
            strict=True,
        ):
            rows[name].append(value)
    return {k: np.asarray(v) for k, v in rows.items()}


def test_steps_equal_gymnasium_field_by_field_across_episode_ends():
    env, params = make_env("gymnasium:canter-test/ShortCartPole-v0")
    keys = jax.random.split(jax.random.key(3), 3)
    actions = np.random.default_rng(0).integers(0, 2, size=(40, 3))
    actions[:, 0] = 0  # pushing one way ends episodes by termination within the step limit

    @jax.jit
    def rollout(keys, actions):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def step(state, action):
            obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(keys, state, action, params)
            final = info["final_observation"]
            return state, (obs, reward, terminated, truncated, final)

        _, rows = jax.lax.scan(step, state, actions)
        return obs, rows

    first, (obs, reward, terminated, truncated, final) = rollout(keys, jnp.asarray(actions))
    ends = {"terminated": 0, "truncated": 0}
    for i, words in enumerate(np.asarray(jax.random.key_data(keys))):
        ref = reference("canter-test/ShortCartPole-v0", words, actions[:, i])
        np.testing.assert_allclose(first[i], ref["first"], rtol=1e-6)
        np.testing.assert_allclose(obs[:, i], ref["obs"], rtol=1e-6)
        np.testing.assert_allclose(final[:, i], ref["final"], rtol=1e-6)
        np.testing.assert_array_equal(reward[:, i], ref["reward"])
        np.testing.assert_array_equal(terminated[:, i], ref["terminated"])
        np.testing.assert_array_equal(truncated[:, i], ref["truncated"])
        for kind in ends:
            ends[kind] += int(ref[kind].sum())
    assert min(ends.values()) >= 2, ends  # the walk crossed both kinds of episode end


def test_refusals_name_the_problem(monkeypatch):
    with pytest.raises(ConfigError, match="Gymnasium has no environment 'Nope-v0'"):
        make_env("gymnasium:Nope-v0")
    with pytest.raises(ConfigError, match="Registered versions: CartPole-v0, CartPole-v1"):
        make_env("gymnasium:CartPole-v7")
    with pytest.raises(ConfigError, match="a Dict observation space"):
        make_env("gymnasium:canter-test/DictObs-v0")
    with pytest.raises(ConfigError, match="discrete action space, but sac.py handles continuous"):
        make_env("gymnasium:CartPole-v1", action="continuous", algorithm="sac.py")

    def missing(*args, **kwargs):
        raise gymnasium.error.DependencyNotInstalled(
            'MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`'
        )

    monkeypatch.setattr(gymnasium, "make", missing)
    _build.cache_clear()  # a test before this one in the worker may have built HalfCheetah-v5
    with pytest.raises(ConfigError) as refused:
        make_env("gymnasium:HalfCheetah-v5")
    assert str(refused.value) == (  # Gymnasium's reason in brackets, then canter's install line
        "gymnasium:HalfCheetah-v5 cannot be built here (MuJoCo is not installed, run `pip "
        "install \"gymnasium[mujoco]\"`): pip install -e '.[mujoco]' (canter's mujoco extra)."
    )


SMALL = ppo.Config(
    env="gymnasium:CartPole-v1",
    total_timesteps=4 * 16 * 8,
    num_envs=4,
    num_steps=16,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 16 * 2,
    num_eval_envs=2,
    num_seeds=2,
)


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_ppo_runs_vmapped_seeds_and_the_same_seed_gives_the_same_numbers(tmp_path):
    first = trainer.run(SMALL, ppo.make_train, algo="ppo", verbose=False, run_dir=tmp_path / "a")
    again = trainer.run(SMALL, ppo.make_train, algo="ppo", verbose=False)
    for group in ("train", "eval"):
        for name, value in first.metrics[group].items():
            np.testing.assert_array_equal(again.metrics[group][name], value, err_msg=name)
    returns = first.metrics["train"]["episodic_return"]
    assert returns.shape == (2, 4) and not np.allclose(returns[0], returns[1])  # seeds differ
    assert (tmp_path / "a" / "summary.json").exists()


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_host_simulators_are_not_stepped_by_an_interval_a_stop_may_discard(monkeypatch):
    # A discarded interval would step the simulators past the checkpoint: with callbacks (or a
    # divergence stop) a host-env run computes its intervals one after the other.
    from canter.common.run import runner

    started = []

    class Counted(runner.Pending):
        def __init__(self, fn, *args):
            started.append(int(args[-2]))  # the first interval of the call
            super().__init__(fn, *args)

    monkeypatch.setattr(runner, "Pending", Counted)
    seen = []
    result = trainer.run(
        SMALL,
        ppo.make_train,
        algo="ppo",
        verbose=False,
        callbacks=[lambda interval: seen.append(list(started))],
    )
    assert seen == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert result.summary["complete"]


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_a_ragged_last_interval_steps_exactly_the_iterations_it_keeps(monkeypatch):
    # 8 iterations in intervals of 3: the last interval's third iteration is skipped by a real
    # cond, so the simulators take the kept steps only (evaluation stubbed out: it is counted
    # in the next test).
    ragged = dataclasses.replace(SMALL, eval_every=4 * 16 * 3)
    env, params = make_env(ragged.env)
    pool = env.unwrapped.pool
    before = pool.steps
    nothing = {"episodic_return": jnp.float32(0), "episodic_length": jnp.float32(0)}
    monkeypatch.setattr(trainer.Train, "evaluate", lambda self, state, key: nothing)
    result = trainer.run(ragged, ppo.make_train, algo="ppo", verbose=False)
    intervals = result.metrics["eval"]["episodic_return"].shape[1]
    train_steps = ragged.num_seeds * 8 * ragged.num_envs * ragged.num_steps
    assert intervals == 3 and pool.steps - before == train_steps


def test_host_evaluation_stops_once_every_episode_has_ended():
    # One action forever topples CartPole within a few dozen steps of its 500-step limit: the
    # evaluation loop stops there (a fixed-length scan would step every simulator 500 times),
    # with the numbers of each env's episode played out to its end in Gymnasium by hand.
    env, params = make_env("gymnasium:CartPole-v1")
    pool = env.unwrapped.pool
    push = lambda obs, carry: (jnp.ones(obs.shape[0], jnp.int32), carry)  # noqa: E731
    before = pool.steps
    key = jax.random.key(0)
    host = jax.jit(lambda key: run_episodes(env, params, push, None, key, 3))(key)
    steps = pool.steps - before
    # run_episodes resets env i with the i-th of 3 keys split from the first half of its key.
    reset_keys = jax.random.split(jax.random.split(key)[0], 3)
    lengths = []
    for words in np.asarray(jax.random.key_data(reset_keys)):
        played = gymnasium.make("CartPole-v1")
        played.reset(seed=_seed(words))
        length, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = played.step(1)
            length, done = length + 1, terminated or truncated
        lengths.append(length)
    assert max(lengths) < 100  # toppled long before the limit
    assert steps == 3 * max(lengths), (steps, lengths)  # stopped after the last episode's end
    assert float(host["episodic_length"]) == pytest.approx(np.mean(lengths))
    assert float(host["episodic_return"]) == pytest.approx(np.mean(lengths))  # reward 1 a step


def test_cli_refuses_before_compiling_with_exit_2(monkeypatch, capsys):
    # Through the CLI's main in-process (tests/test_cli.py runs one refusal by subprocess).
    cases = [
        (("--env", "gymnasium:HalfCheetah-v9"), "Registered versions: HalfCheetah-v2"),
        (("--env", "gymnasium:canter-missing/Nope-v0"), "Gymnasium has no environment"),
        (
            ("--env", "gymnasium:CartPole-v1"),
            "continuous actions only. For discrete actions use algorithms/ppo.py",
        ),
    ]
    for args, needle in cases:
        code, _, err = cli_in_process("sac", monkeypatch, capsys, *args)
        assert code == 2 and needle in err, (args, err[-2000:])
    code, _, err = cli_in_process(
        "ppo", monkeypatch, capsys, "--env", "gymnasium:CartPole-v1", "--data-parallel"
    )
    assert code == 2 and "nothing to split" in err, err[-2000:]


def metrics_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # a host-env PPO program compiles
def test_a_stopped_host_run_resumes_with_new_episodes_and_continues_the_metrics(tmp_path, capsys):
    # Stopped after interval 2 of 10 (checkpointed there, as a preempted run is), then resumed
    # twice from copies of the same directory. A SIGKILL's resume is tests/test_run_management.py's.
    config = ppo.Config(
        env="gymnasium:CartPole-v1",
        total_timesteps=4 * 32 * 40,
        num_steps=32,
        eval_every=4 * 32 * 4,
        num_eval_envs=2,
    )
    stopped = tmp_path / "stopped"
    stop = lambda interval: interval.index == 1  # noqa: E731
    first = trainer.run(
        config, ppo.make_train, algo="ppo", run_dir=stopped, callbacks=[stop], verbose=False
    )
    assert first.summary["intervals"] == 2 and not first.summary["complete"]
    copy = tmp_path / "copy"
    shutil.copytree(stopped, copy)
    for run_dir in (stopped, copy):
        # Each resume with fresh simulators, as a new process has: the env (and its pool of
        # Gymnasium simulators) is built once per process and kept (registry._build).
        _build.cache_clear()
        capsys.readouterr()
        resumed = trainer.run(config, ppo.make_train, algo="ppo", run_dir=run_dir, resume=True)
        assert resumed.summary["complete"]
        assert "host simulators cannot be saved" in capsys.readouterr().out
    rows = metrics_rows(stopped / "seed_0" / "metrics.csv")
    assert [int(r["interval"]) for r in rows] == list(range(1, 11))  # no gap, no repeat
    # A resumed run is a function of its checkpoint: restarted simulators are seeded from it.
    assert rows == metrics_rows(copy / "seed_0" / "metrics.csv")


@pytest.mark.slow
def test_sac_on_a_box_action_space_and_the_gif_of_a_host_run(tmp_path, capsys):
    from canter.algorithms import evaluate, sac

    config = sac.Config(
        env="gymnasium:Pendulum-v1",
        total_timesteps=300,
        learning_starts=100,
        eval_every=100,
        num_eval_envs=1,
        num_seeds=2,
        hidden_size=16,
    )
    result = trainer.run(config, sac.make_train, algo="sac", verbose=False, run_dir=tmp_path / "r")
    assert np.isfinite(result.metrics["train"]["value_loss"][:, -1]).all()
    assert np.all(result.metrics["eval"]["episodic_length"] == 200)
    # evaluate.py's main in this process (its command line: tests/test_run_management.py).
    gif = tmp_path / "episode.gif"
    capsys.readouterr()
    evaluated = evaluate.main(tmp_path / "r", episodes=1, gif=gif)
    assert len(evaluated["returns"]) == 2 and np.all(np.isfinite(evaluated["returns"]))
    assert "over 200 steps" in capsys.readouterr().out and gif.read_bytes().startswith(b"GIF8")


QUIET_MUJOCO = """
import jax
from canter.common.envs import make_env
from canter.common.envs.host import make_gymnasium

env, params = make_env("gymnasium:HalfCheetah-v5")
keys = jax.random.split(jax.random.key(0), 3)
for _ in range(2):  # two batches of three simulators through the host pool
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    for _ in range(3):
        obs, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, state, jax.numpy.zeros((3, 6)), params)
for seed in range(2):
    sim = make_gymnasium("HalfCheetah-v5")
    sim.reset(seed=seed)
    sim.close()
print("done")
"""


@pytest.mark.slow  # a fresh interpreter that imports MuJoCo
def test_mujoco_envs_print_no_deprecation_and_leave_no_log_file(tmp_path):
    pytest.importorskip("mujoco", reason="the mujoco extra: pip install -e '.[mujoco]'")
    done = subprocess.run(
        [sys.executable, "-c", QUIET_MUJOCO],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "deprecated" not in output and "settotalmass" not in output, output[-2000:]
    assert done.stdout.strip() == "done", done.stdout
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


# MuJoCo on the host end to end: SAC trains two seeds twice with the same numbers (simulators
# seeded from the run's keys), evaluates full 1,000-step episodes and draws offscreen. (TD3's
# loop over a host env is SAC's: each steps its envs through the same vector_step.)
@pytest.mark.slow
def test_mujoco_halfcheetah_repeats_its_numbers_and_draws_offscreen(repo_root, tmp_path):
    pytest.importorskip("mujoco", reason="the mujoco extra: pip install -e '.[mujoco]'")
    from canter.algorithms import sac

    config = sac.Config(
        env="gymnasium:HalfCheetah-v5",
        total_timesteps=200,
        learning_starts=100,
        eval_every=200,
        num_eval_envs=1,
        num_seeds=2,
        hidden_size=16,
    )
    first = trainer.run(config, sac.make_train, algo="sac", verbose=False, run_dir=tmp_path / "r")
    again = trainer.run(config, sac.make_train, algo="sac", verbose=False)
    for name, value in first.metrics["eval"].items():
        np.testing.assert_array_equal(again.metrics["eval"][name], value, err_msg=name)
    assert np.all(first.metrics["eval"]["episodic_length"] == 1000)  # no early termination
    gif = tmp_path / "cheetah.gif"
    command = [
        sys.executable,
        str(repo_root / "algorithms" / "evaluate.py"),
        str(tmp_path / "r"),
        "--episodes",
        "1",
        "--gif",
        str(gif),
        "--gif-steps",  # of the episode's 1000: the whole took 2 minutes here
        "100",
    ]
    headless = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    headless.pop("MUJOCO_GL", None)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=headless)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "over 100 steps" in done.stdout and gif.read_bytes().startswith(b"GIF8")
    # A backend that cannot draw here (GLFW needs a display) is refused in one line, no traceback.
    glfw = {**headless, "MUJOCO_GL": "glfw"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=glfw)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]  # above it: GLFW's own warning, if any
    assert last.startswith("error: gymnasium:HalfCheetah-v5 cannot draw frames") and "=egl" in last
