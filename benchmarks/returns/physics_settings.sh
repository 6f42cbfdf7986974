# Shared by benchmarks/returns/cpu_physics.sh and benchmarks/gpu/gpu_suites.sh (sourced): rejax's
# benchmark/hopper_1m.yaml for Brax hopper, as far as canter's flags reach it
# (docs/notes/playground-reference.md section 5). PPO 32 envs x 32 steps, 9 epochs of 2
# minibatches, lr 2.567e-4, grad norm 1, gamma 0.995, tanh 64 x 64, no normalisation; SAC and TD3
# 128 envs with 128 updates per step of them (its polyak 0.95 once per step of the envs is tau
# 0.0004 per update here). Each is a list of returns.py --set FIELD=VALUE words.
# shellcheck disable=SC2034  # read by the scripts that source this file
ppo_hopper="total_timesteps=1000000 eval_every=32768 num_eval_envs=20 num_envs=32 num_steps=32"
ppo_hopper="$ppo_hopper update_epochs=9 num_minibatches=2 learning_rate=2.567e-4 anneal_lr=False"
ppo_hopper="$ppo_hopper max_grad_norm=1.0 gamma=0.995 norm_obs=False norm_reward=False"
# shellcheck disable=SC2034
sac_hopper="total_timesteps=1000000 eval_every=32768 num_eval_envs=20 num_envs=128 train_frequency=1"
sac_hopper="$sac_hopper buffer_size=1000000 learning_starts=10000 batch_size=128 gamma=0.995"
sac_hopper="$sac_hopper policy_lr=5.72e-4 q_lr=5.72e-4 tau=0.0004"
# shellcheck disable=SC2034
td3_hopper="total_timesteps=1000000 eval_every=262144 num_eval_envs=20 num_envs=128 train_frequency=1"
td3_hopper="$td3_hopper buffer_size=1048576 learning_starts=8192 batch_size=256 gamma=0.995"
td3_hopper="$td3_hopper learning_rate=1.879e-4 tau=0.0004 exploration_noise=0.5 policy_noise=0.8"
td3_hopper="$td3_hopper noise_clip=0.5 policy_frequency=3"
