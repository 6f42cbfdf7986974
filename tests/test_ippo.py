"""IPPO: one shared network on each agent's own observation, per-agent GAE streams cut by the
team's episode ends, masks, the run's invariants, resume, CLI and MPE learning (the env:
tests/test_jaxmarl.py)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_resume_equals_whole_run,
    cli_run,
    needs,
)
from tests.test_invariants import counting

pytestmark = needs("jaxmarl", "jaxmarl")


def ippo():
    from canter.algorithms import ippo

    return ippo


TINY = dict(
    total_timesteps=4 * 16 * 12,
    eval_every=4 * 16 * 6,
    num_eval_envs=2,
    num_envs=4,
    num_steps=16,
    update_epochs=2,
    num_minibatches=4,
    hidden_size=16,
)


def test_the_shared_network_sees_each_agents_own_observation_and_id():
    module = ippo()
    for agent_ids in (False, True):
        config = module.Config(agent_ids=agent_ids)
        model = module.ActorCritic((3, 18), 5, config, jax.random.key(0))
        obs = jax.random.normal(jax.random.key(1), (3, 18))
        logits, values = model.logits(obs), model.value(obs)
        for i in range(3):
            own = jnp.concatenate([obs[i], jnp.eye(3)[i]]) if agent_ids else obs[i]
            np.testing.assert_allclose(logits[i], model.actor(own), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(values[i], model.critic(own)[0], rtol=1e-5, atol=1e-7)
        # The same observation gives the same policy to every agent only without ids.
        same = jnp.broadcast_to(obs[0], (3, 18))
        rows = np.asarray(model.logits(same))
        assert np.allclose(rows[0], rows[1]) != agent_ids


def test_act_takes_valid_actions_only_for_every_agent(vmapped):
    module = ippo()
    state = jax.tree.map(lambda x: x[0], vmapped[0])
    obs = jax.random.normal(jax.random.key(1), (16, 3, 75))
    mask = jax.random.bernoulli(jax.random.key(2), 0.3, (16, 3, 8)).at[..., 4].set(True)
    for key in (None, jax.random.key(3)):
        action = np.asarray(module.act(state, obs, mask, key))
        assert action.shape == (16, 3)
        assert np.take_along_axis(np.asarray(mask), action[..., None], -1).all()


@pytest.fixture(scope="module")
def vmapped():
    from canter.algorithms import trainer

    module = ippo()
    train, counts = counting(module.make_train(module.Config(**TINY, env="jaxmarl:smax:3m")))
    result = jax.jit(jax.vmap(train))(trainer.seed_keys(0, 2))
    assert counts == {"step": 1, "act": 1}  # traced once
    return result


def test_leaves_metrics_wins_and_seeds(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    train = metrics["train"]
    assert {"policy_loss", "value_loss", "entropy", "episodic_return", "wins"} <= set(train)
    assert train["policy_loss"].shape == (2, 2)
    assert np.isfinite(train["policy_loss"]).all()
    wins = np.asarray(train["wins"])
    assert ((wins >= 0) & (wins <= 1) | np.isnan(wins)).all()
    # 12 iterations, 2 epochs of 4 minibatches each.
    assert int(state.opt_state[1][0].count[0]) == 12 * 2 * 4
    weights = state.model.actor.layers[0].weight
    assert not np.allclose(weights[0], weights[1])  # seeds differ
    assert {"episodic_return", "wins"} <= set(metrics["eval"])


def test_bad_minibatches_are_refused_before_tracing():
    module = ippo()
    config = module.Config(**dict(TINY, num_minibatches=5))
    with pytest.raises(ConfigError, match="num_minibatches = 5 must divide .* 3 agents = 192"):
        module.make_train(config)


@pytest.mark.slow  # a program of its own compiles: about 20 s on 2 busy cores
def test_the_update_replays_the_rollouts_policy_exactly():
    """With a learning rate of 0 every minibatch sees the rollout's parameters, so the loss's
    recomputed log-probabilities equal the stored ones sample by sample (approx KL and clip
    fraction 0): the batch's flattening keeps each agent's observation, mask, action and
    log-probability together. The actor's output layer is scaled up so that its policy
    is far from uniform (at its init gain of 0.01 a misaligned sample differs by little); the
    second iteration's rollout starts from the memories the first left."""
    import equinox as eqx

    module = ippo()
    config = module.Config(**TINY, env="jaxmarl:smax:3m", learning_rate=0.0)
    train = module.make_train(config)
    state = train.init(jax.random.key(0))
    state = eqx.tree_at(
        lambda s: s.model.actor.layers[-1].weight, state, replace_fn=lambda w: w * 300.0
    )
    step = jax.jit(train.step)
    state, _ = step(state, jnp.array(0))
    _, metrics = step(state, jnp.array(1))
    assert float(metrics["entropy"]) < 1.5  # far from uniform over SMAX's 8 actions (2.08)
    np.testing.assert_allclose(metrics["approx_kl"], 0.0, atol=1e-6)
    np.testing.assert_allclose(metrics["clipfrac"], 0.0, atol=1e-6)


# --- resume, command line, learning


@pytest.mark.slow  # three runs compile
def test_resume_equals_the_whole_run(tmp_path):
    module = ippo()
    config = module.Config(**TINY, num_seeds=2)
    assert_resume_equals_whole_run(config, module.make_train, "ippo", tmp_path)


@pytest.mark.slow  # a CLI run, its evaluation and a GIF of MPE
def test_cli_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    run = tmp_path / "run"
    done = cli_run("ippo", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    config = json.loads((run / "config.json").read_text())
    assert config["env"] == "jaxmarl:MPE_simple_spread_v3" and config["num_envs"] == 4
    assert_evaluates_and_renders(run, tmp_path / "team.gif", 2)


@pytest.mark.learning  # 4 seeds of the defaults: about 45 s on 2 cores
def test_mpe_simple_spread_team_beats_random_actions_by_far():
    from canter.algorithms import trainer

    module = ippo()
    # JaxMARL's ippo_ff_mpe configuration (the defaults) for 1e6 team steps, 4 seeds: measured
    # -60.0, -65.0, -52.9, -55.5 (docs/results.md, teams), against random actions' -83.1.
    config = module.Config(num_seeds=4, eval_every=1_024_000)
    result = trainer.run(config, module.make_train, algo="ippo", verbose=False)
    returns = np.asarray(result.metrics["eval"]["episodic_return"][:, -1])
    assert np.all(returns >= -70.0), returns
    assert returns.mean() >= -63.0, returns
