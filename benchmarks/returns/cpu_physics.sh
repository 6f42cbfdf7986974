#!/usr/bin/env bash
# The CPU rows of the JAX physics suites (issue 26), 4 seeds each, through
# benchmarks/returns/returns.py into benchmarks/results/returns (the returns table of
# docs/results.md), in this order (the names are what --only takes):
#   1. dm-control: ppo_continuous on Playground's CartpoleSwingup and ReacherEasy (4,194,304 env
#      steps) and CheetahRun (2,097,152): the learning test's configuration (64 envs x 128
#      steps, 10 epochs of 32 minibatches, tanh 64 x 64, observation and reward normalisation,
#      gamma 0.99): 4 seeds of CheetahRun trained at 33,799 env steps/s in all, against 5,197
#      for one seed of the Playground preset (5 x 256 critic, 16 epochs; docs/speed.md)
#   2. brax: ppo_continuous on brax:hopper and brax:ant, 1e6 env steps, in rejax's hopper_1m
#      settings (benchmarks/returns/physics_settings.sh), evaluated every 262,144 env steps
#   3. sac: SAC on the same three DM Control tasks, 204,800 env steps, the learning test's
#      configuration (16 envs, one update of 128 samples per env step, sac.py's 64 x 64 ReLU
#      networks): an update costs 0.4 ms on this CPU against the Playground preset's 12.5 ms
#      (512 samples, 256 x 256 with LayerNorm critics), so it makes 16x the preset's updates
#      per env step, 4 seeds of CheetahRun at 3,444 env steps/s in all against 1,173 for one
#      seed of the preset
# About 35 minutes on the 2-core CPU (33 min on 2026-11-26, compiles included). The published numbers beside the rows (figure readings)
# are in benchmarks/returns/returns.py.
#
#   bash benchmarks/returns/cpu_physics.sh
#   bash benchmarks/returns/cpu_physics.sh --only brax sac
set -euo pipefail
cd "$(dirname "$0")/../.."

only=""
if [[ "${1:-}" == "--only" ]]; then
    only=" ${*:2} "
fi
python=${PYTHON:-python}
# shellcheck source=benchmarks/returns/physics_settings.sh
. benchmarks/returns/physics_settings.sh

dm="num_envs=64 num_steps=128 gamma=0.99 eval_every=1048576 num_eval_envs=16"
if [[ -z "$only" || "$only" == *" dm-control "* ]]; then
    # shellcheck disable=SC2086  # the override lists split into words on purpose
    "$python" benchmarks/returns/returns.py --algo ppo_continuous --num-seeds 4 \
        --envs playground:CartpoleSwingup playground:ReacherEasy --set $dm total_timesteps=4194304
    # shellcheck disable=SC2086
    "$python" benchmarks/returns/returns.py --algo ppo_continuous --num-seeds 4 \
        --envs playground:CheetahRun --set $dm total_timesteps=2097152
fi
if [[ -z "$only" || "$only" == *" brax "* ]]; then
    # shellcheck disable=SC2086
    "$python" benchmarks/returns/returns.py --algo ppo_continuous --num-seeds 4 \
        --envs brax:hopper brax:ant --set $ppo_hopper eval_every=262144
fi
if [[ -z "$only" || "$only" == *" sac "* ]]; then
    "$python" benchmarks/returns/returns.py --algo sac --num-seeds 4 \
        --envs playground:CartpoleSwingup playground:ReacherEasy playground:CheetahRun \
        --set num_envs=16 train_frequency=1 total_timesteps=204800 eval_every=51200 num_eval_envs=16
fi
