"""`playground:<Task>` and `brax:<name>` (common/envs/physics.py): spaces, the gymnax-1.0 step,
truncation at the episode limit, termination, spare resets, refusals, and the continuous
algorithms on them."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError
from canter.common.envs import base_state, make_env, physics, registry, vector_step

from tests.checks import needs

NEEDS_PLAYGROUND = needs("mujoco_playground", "playground")

CARTPOLE, HOPPER = "playground:CartpoleBalance", "brax:hopper"


def short(params, limit: int):
    """`params` with episodes cut after `limit` steps (the tests cannot run 1,000)."""
    return physics.PhysicsParams(limit)


@pytest.mark.slow  # compiles MJX or Brax steps: 10-20 s each on 2 cores
@pytest.mark.parametrize("name, obs_size, action_size", [(CARTPOLE, 5, 1), (HOPPER, 11, 3)])
def test_spaces_and_a_gymnax_step(name, obs_size, action_size):
    env, params = make_env(name, action="continuous")
    assert env.name == name and params.max_steps_in_episode == 1000
    space = env.action_space(params)
    assert space.shape == (action_size,)
    np.testing.assert_array_equal(space.low, -1.0)  # both suites' actuators: [-1, 1]
    np.testing.assert_array_equal(space.high, 1.0)
    assert env.observation_space(params).shape == (obs_size,)
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (obs_size,) and obs.dtype == jnp.float32
    action = jnp.full((action_size,), 0.5)
    obs, state, reward, terminated, truncated, info = jax.jit(env.step)(
        jax.random.key(1), state, action, params
    )
    assert obs.shape == (obs_size,) and obs.dtype == jnp.float32
    assert reward.shape == () and reward.dtype == jnp.float32
    assert not bool(terminated) and not bool(truncated)
    assert set(info) >= {"final_observation", "terminated", "truncated"}
    assert int(base_state(state).state.time) == 1


@pytest.mark.slow  # compiles MJX or Brax steps: 10-20 s each on 2 cores
def test_the_episode_limit_is_a_truncation_and_the_next_episode_starts_in_the_spare():
    env, params = make_env(CARTPOLE)
    params = short(params, 3)
    obs, state = env.reset(jax.random.key(2), params)
    spare_obs = base_state(state).spare_obs
    step = jax.jit(env.step)
    for t in range(3):
        obs, state, reward, terminated, truncated, info = step(
            jax.random.key(t), state, jnp.zeros(1), params
        )
    assert bool(truncated) and not bool(terminated)  # DM Control ends by time only
    np.testing.assert_array_equal(obs, spare_obs)
    assert not np.array_equal(info["final_observation"], obs)
    inner = base_state(state)
    assert int(inner.state.time) == 0 and not bool(inner.spare_fresh)
    assert int(state.ended) == 1  # episode statistics see the end
    assert float(state.ended_length) == 3


@pytest.mark.slow  # compiles MJX or Brax steps: 10-20 s each on 2 cores
def test_a_fallen_hopper_terminates_and_is_not_truncated():
    env, params = make_env(HOPPER)
    step = jax.jit(env.step)
    obs, state = env.reset(jax.random.key(3), params)
    key = jax.random.key(4)
    steps = 0
    while steps < 200:  # full-strength random torques topple it within a few dozen steps
        key, draw = jax.random.split(key)
        action = jax.random.uniform(draw, (3,), minval=-1.0, maxval=1.0)
        obs, state, reward, terminated, truncated, info = step(draw, state, action, params)
        steps += 1
        if bool(terminated):
            break
    assert bool(terminated) and not bool(truncated) and steps < 200
    height = float(info["final_observation"][0])  # the torso's height, below healthy (0.7)
    assert height < 0.7 or abs(float(info["final_observation"][1])) > 0.2


@pytest.mark.slow  # compiles MJX or Brax steps: 10-20 s each on 2 cores
def test_every_env_of_a_batch_restarts_from_the_spare_it_drew_first():
    env, params = make_env(CARTPOLE)
    params = short(params, 2)
    num_envs = 8
    keys = jax.random.split(jax.random.key(5), num_envs)
    obs, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    spares = base_state(states).spare_obs
    step = jax.jit(vector_step(env))
    actions = jnp.zeros((num_envs, 1))
    starts = []
    for _ in range(3):  # three episodes, all ending together, as DM Control's do
        for _ in range(2):
            obs, states, reward, terminated, truncated, info = step(keys, states, actions, params)
        assert bool(truncated.all())
        starts.append(obs)
    for start in starts:  # Brax's and Playground's training wrappers do the same
        np.testing.assert_array_equal(start, spares)
    assert len(np.unique(np.asarray(spares), axis=0)) == num_envs  # different per env
    assert not np.array_equal(info["final_observation"], spares)  # the episodes did move


@pytest.fixture
def without_suites(monkeypatch):
    """Neither suite importable (as without the extras), and no env cached from before."""
    for module in ("mujoco_playground", "brax"):
        monkeypatch.setitem(sys.modules, module, None)
    registry._build.cache_clear()
    yield
    registry._build.cache_clear()


def test_refusals_name_the_accepted_envs_and_the_install_lines(without_suites):
    with pytest.raises(ConfigError, match="Unknown Playground environment 'CheetahWalk'") as error:
        make_env("playground:CheetahWalk")
    assert "playground:CheetahRun" in str(error.value)
    with pytest.raises(ConfigError, match="Unknown Brax environment 'hoper'") as error:
        make_env("brax:hoper")
    assert "brax:hopper" in str(error.value)
    with pytest.raises(ConfigError, match=r'needs the playground extra: pip install -e "\.\['):
        make_env(CARTPOLE)
    with pytest.raises(ConfigError, match=r'needs the brax extra: pip install -e "\.\[brax\]"'):
        make_env(HOPPER)
    with pytest.raises(ConfigError, match=r"playground:CheetahRun \(pip install"):
        make_env("CheetahRun")


@NEEDS_PLAYGROUND
@pytest.mark.slow  # imports Playground: 5 s
def test_playgrounds_envs_that_download_are_refused_before_any_download():
    from mujoco_playground import locomotion

    task = locomotion.ALL_ENVS[0]
    with pytest.raises(ConfigError, match="git-clone mujoco_menagerie"):
        make_env(f"playground:{task}")


@NEEDS_PLAYGROUND
@pytest.mark.slow  # imports Playground: 5 s
def test_the_task_list_is_playgrounds_dm_control_suite():
    from mujoco_playground import dm_control_suite

    assert set(physics.PLAYGROUND_TASKS) == set(dm_control_suite.ALL_ENVS)
    from brax import envs

    assert set(physics.BRAX_ENVS) == set(envs._envs) - set(physics.BRAX_REFUSED)
    with pytest.raises(ConfigError, match="jax 0.10 removed") as refusal:
        make_env("brax:swimmer")
    assert "brax:hopper" in str(refusal.value)


@pytest.mark.slow  # a fresh interpreter
def test_the_registry_imports_the_suites_only_to_build_their_envs(repo_root):
    # (An unknown `playground:` name imports Playground, to say whether it is one of the envs
    # that download.)
    script = (
        "import sys\n"
        "from canter.common.envs import make_env\n"
        "make_env('CartPole-v1')\n"
        "try:\n"
        "    make_env('brax:nope')\n"
        "except Exception:\n"
        "    pass\n"
        "assert 'brax' not in sys.modules and 'mujoco_playground' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=repo_root, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow  # compiles MJX or Brax steps: 10-20 s each on 2 cores
def test_a_physics_state_survives_a_checkpoint(tmp_path):
    from canter.common.run import checkpoint

    for name in (CARTPOLE, HOPPER):
        env, params = make_env(name)
        keys = jax.random.split(jax.random.key(6), 2)
        _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        path = tmp_path / f"{name.replace(':', '_')}.eqx"
        checkpoint.save(path, {"state": states}, {"algo": "test"})
        like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), states)
        loaded, _ = checkpoint.load(path, {"state": like}, {"algo": "test"})
        same = jax.tree.map(np.array_equal, loaded["state"], states)
        assert all(jax.tree.leaves(same)), name


# A continuous algorithm end to end on a Playground task: a short run, and a GIF of it drawn
# offscreen. SAC: its state holds a replay buffer beside the env states, the larger of the two
# kinds (ppo_continuous's MJX program trains in the speed benchmark's test below, and learns in
# the learning_extra tier); drawing does not depend on the
# algorithm (evaluate.py draws every one alike), so a second MJX compile here (about a minute)
# would add no check. Resuming such a run is held by two cheaper tests: MJX and Brax states
# round-trip through a checkpoint bit for bit (test_a_physics_state_survives_a_checkpoint), and
# the runner resumes any state it can save (tests/test_run_management.py); stopping and resuming
# here too cost a second trace of the MJX program and a third 1,000-step evaluation.
TINY_SAC = dict(num_envs=4, batch_size=16, buffer_size=256, learning_starts=32)


@pytest.mark.slow  # an MJX program compiles: about a minute on 2 cores
def test_sac_trains_and_draws_on_playground(tmp_path):
    from canter.algorithms import evaluate, sac, trainer

    config = sac.Config(
        env=CARTPOLE,
        num_seeds=2,
        total_timesteps=128,
        eval_every=64,
        num_eval_envs=2,
        hidden_size=16,
        **TINY_SAC,
    )
    run = dict(algo="sac", run_dir=tmp_path / "r", verbose=False)
    result = trainer.run(config, sac.make_train, **run)
    assert result.summary["complete"] and result.summary["intervals"] == 2
    returns = np.asarray(result.summary["eval_return"])
    assert returns.shape == (2,) and np.all(np.isfinite(returns))

    # The GIF as evaluate.py draws it, from the saved run, in this process: the greedy
    # evaluation on MJX is the one training ran above (evaluate.py's own program and its command
    # line are tests/test_run_management.py's; a MuJoCo GIF drawn offscreen without a display is
    # tests/test_host.py's, through the same renderer). The first 10 of the episode's 1000
    # steps: each drawn step is a call to the MJX step, and the whole episode took about 4
    # minutes here.
    gif = tmp_path / "cartpole.gif"
    module, _, configs, state, _ = evaluate.load_run(tmp_path / "r", episodes=1)
    total, length = evaluate.render_gif(module, configs, state, 1, gif, seed=0, steps=10)
    assert length == 10 and np.isfinite(total) and gif.read_bytes().startswith(b"GIF8")


# ppo_continuous's preset: the one MJX PPO program of the default and slow tiers (sac's compiles
# in test_sac_trains_and_draws_on_playground above; ppo_continuous learns on MJX in the
# learning_extra tier, which CI leaves out).
@pytest.mark.slow  # small MJX programs and a PPO preset compile
def test_the_speed_benchmark_runs_and_writes_its_table(repo_root, tmp_path):
    import json

    # 8 envs, the preset's width: the canter way's row is its ceiling (a width the table leaves
    # out is measured in one more process, and each builds the MJX env: about 13 s here).
    args = ["--envs-jax", CARTPOLE, "--widths", "8", "--steps", "2", "--calls", "1"]
    args += ["--repeats", "1", "--ways", "canter", "no-reset", "--out", str(tmp_path)]
    small = "num_envs=8,num_steps=4,num_minibatches=2,update_epochs=1"
    args += ["--presets", f"ppo_continuous:CartpoleBalance:{small}", "--seconds", "0"]
    command = [sys.executable, "benchmarks/speed/speed_physics.py", *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=repo_root, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "speed_physics.json").read_text())
    (canter,) = record["results"][f"{CARTPOLE} | canter"]["8"]["rounds"]
    assert canter["steps"] == 8 * 2 and canter["steps_per_s"] > 0 and canter["ended"] == 0
    table = (tmp_path / "speed_physics.md").read_text()
    assert f"| {CARTPOLE} | canter |" in table and f"| {CARTPOLE} | no-reset |" in table
    preset = record["presets"][f"ppo_continuous:CartpoleBalance:{small}"]
    assert preset["num_envs"] == 8 and preset["iterations"] >= 1 and preset["steps_per_s"] > 0
    # An iteration: 8 envs x 4 steps, one epoch of 2 minibatches.
    assert preset["updates_per_s"] == pytest.approx(preset["steps_per_s"] / 32 * 2)
    table_row = "ppo_continuous --preset CartpoleBalance"
    row = next(line for line in table.splitlines() if table_row in line)
    assert (
        "--num-envs 8 --num-steps 4" in row
        and f"| {CARTPOLE} | 8 |" in row
        and "not measured" not in row
    )


# --- learning: on playground:CartpoleBalance, where uniformly random actions return 344.4
# (128 episodes, benchmarks/results/returns/random_returns.md). Measured here (4 seeds, 2 CPU
# cores): ppo_continuous, 1,048,576 env steps (64 envs x 128 steps, gamma 0.99, the default
# 64 x 64 tanh MLPs), final greedy returns 996.1, 985.5, 999.7, 977.3, in 69 s with its 36 s
# compile (sac, 50,000 env steps, 16 envs: 907.0, 959.0, 996.9, 995.4; its learning is checked on
# Pendulum, tests/test_sac.py, and its MJX path above). The threshold is halfway from the random
# return to the worst seed, for every seed. The test evaluates once, at the end (the
# measurements above evaluated 4 and 5 times): only the last evaluation is read, and the earlier
# ones, 1000 sequential MJX steps each, cost as much as a quarter of a test; evaluations draw
# their own keys, so no training number moves. The test trains the first two of the four seeds
# (one per CPU device of a test worker), each held to the threshold: four took CI about four
# minutes.
RANDOM_CARTPOLE_BALANCE = 344.4


@pytest.mark.learning_extra
def test_ppo_continuous_balances_the_playground_cartpole():
    from canter.algorithms import ppo_continuous, trainer

    config = ppo_continuous.Config(
        env=CARTPOLE,
        num_envs=64,
        num_steps=128,
        total_timesteps=1_048_576,
        gamma=0.99,
        eval_every=1_048_576,
        num_eval_envs=16,
        num_seeds=2,
    )
    result = trainer.run(config, ppo_continuous.make_train, algo="ppo_continuous", verbose=False)
    threshold = (RANDOM_CARTPOLE_BALANCE + 977.3) / 2
    assert min(result.summary["eval_return"]) >= threshold, result.summary


@pytest.mark.slow  # builds a Brax model: a few seconds
def test_brax_builds_without_its_maintenance_warning():
    pytest.importorskip("brax", reason="the brax extra: pip install -e '.[brax]'")
    import warnings

    from canter.common.envs import physics

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        physics.make_brax_env("brax:hopper")  # not cached: the model loads here
    assert not [w for w in caught if "actively" in str(w.message)], [str(w.message) for w in caught]
