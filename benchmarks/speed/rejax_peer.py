"""rejax (0.1.3, PyPI; `pip install -e ".[bench]"`) on canter's settings: PPO, DQN, SAC, TD3.

The peer of speed_ppo.py, speed_dqn.py, speed_offpolicy.py, speed_minatar.py and speed_dp.py,
run rejax's own way, `jax.jit(jax.vmap(algo.train))`, in a worker process. Each builder returns
rejax's `train(key)` and a reader of its final evaluation return per seed; rejax is imported
inside them, so the scripts load without it.
"""

from benchmarks.harness import EVAL_EPISODES


def finish(algo, env):
    """rejax's `train` and its final-return reader, with canter's evaluation (EVAL_EPISODES
    episodes) and the env behind gymnax 1.0's adapter to the pre-1.0 step API rejax speaks
    (done = terminated or truncated). The adapter goes in after `create`, whose deepcopy
    recursed forever on it."""
    from gymnax.wrappers.compat import LegacyStepAPIWrapper
    from rejax.evaluate import evaluate

    class Legacy(LegacyStepAPIWrapper):
        def __deepcopy__(self, memo):
            return self

    def eval_callback(algo, ts, key):
        max_steps = algo.env_params.max_steps_in_episode
        return evaluate(algo.make_act(ts), key, algo.env, algo.env_params, EVAL_EPISODES, max_steps)

    def final_return(outputs):
        _, (_, returns) = outputs
        return returns[:, -1].mean(axis=-1)  # (seeds,)

    return algo.replace(env=Legacy(env), eval_callback=eval_callback).train, final_return


def ppo(setup: dict, eval_every: int):
    """rejax's PPO on a speed_ppo.py setup (env, sizes, minibatches, learning rate and its
    annealing, gamma, activation, hidden width), 4 epochs, PureJaxRL's other settings, an
    evaluation every `eval_every` iterations."""
    import gymnax
    import optax
    from rejax import PPO

    env, env_params = gymnax.make(setup["env"])
    num_envs, num_steps, iterations = setup["num_envs"], setup["num_steps"], setup["iterations"]
    num_minibatches, epochs, rate = setup["minibatches"], 4, setup["learning_rate"]
    schedule = optax.linear_schedule(rate, 0.0, iterations * epochs * num_minibatches)
    created = PPO.create(
        env=env,
        env_params=env_params,
        num_envs=num_envs,
        num_steps=num_steps,
        num_epochs=epochs,
        num_minibatches=num_minibatches,
        learning_rate=schedule if setup["anneal_lr"] else rate,
        max_grad_norm=0.5,
        gamma=setup["gamma"],
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        total_timesteps=iterations * num_envs * num_steps,
        eval_freq=eval_every * num_envs * num_steps,
        skip_initial_evaluation=True,
        agent_kwargs={
            "activation": setup["activation"],
            "hidden_layer_sizes": (setup["hidden"],) * 2,
        },
    )
    return finish(created, env)


def dqn(config):
    """rejax's DQN on canter's DQN `config` (CartPole-v1): a hard target copy, no double DQN,
    one update per iteration of `num_envs` env steps."""
    import gymnax
    from rejax import DQN

    env, env_params = gymnax.make("CartPole-v1")
    algo = DQN.create(
        env=env,
        env_params=env_params,
        num_envs=config.num_envs,
        buffer_size=config.buffer_size,
        fill_buffer=config.learning_starts,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        gamma=config.gamma,
        eps_start=config.start_e,
        eps_end=config.end_e,
        exploration_fraction=config.exploration_steps / config.total_timesteps,
        target_update_freq=config.target_network_frequency,
        polyak=0.0,  # a hard copy, as in canter
        ddqn=False,
        num_epochs=1,  # one update per iteration of num_envs env steps
        total_timesteps=config.total_timesteps,
        eval_freq=config.eval_every,
        skip_initial_evaluation=True,
        agent_kwargs={"activation": "relu"},
    )
    return finish(algo, env)


def offpolicy(algo: str, config):
    """rejax's SAC or TD3 on canter's `config`: 1 env, buffer 1e5 filled with 1,000 steps first,
    batch 128, an update per env step, Polyak 0.995, 64x64 ReLU networks (rejax has one
    learning rate: canter's actor rate, 3e-4, where canter's SAC uses 1e-3 for the critics)."""
    import gymnax
    from rejax import SAC, TD3

    env, env_params = gymnax.make(config.env)
    common = dict(
        env=env,
        env_params=env_params,
        num_envs=config.num_envs,
        buffer_size=config.buffer_size,
        fill_buffer=config.learning_starts,
        batch_size=config.batch_size,
        gamma=config.gamma,
        polyak=1.0 - config.tau,
        total_timesteps=config.total_timesteps,
        eval_freq=config.eval_every,
        skip_initial_evaluation=True,
    )
    if algo == "sac":
        created = SAC.create(
            **common, learning_rate=config.policy_lr, agent_kwargs={"activation": "relu"}
        )
    else:
        created = TD3.create(
            **common,
            learning_rate=config.learning_rate,
            policy_delay=config.policy_frequency,
            exploration_noise=config.exploration_noise,
            target_noise=config.policy_noise,
            target_noise_clip=config.noise_clip,
            actor_kwargs={"activation": "relu"},
            critic_kwargs={"activation": "relu"},
        )
    return finish(created, env)
