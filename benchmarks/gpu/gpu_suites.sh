#!/usr/bin/env bash
# The GPU rows of the JAX-native suites (issues 25, 26, 43 and 44), through
# benchmarks/returns/returns.py, in this order (the names are what --only takes; the open
# issues' rows first):
#   1. craftax-1e9 (issues 43 and 44): every Craftax algorithm's Craftax-Symbolic-v1-1e9 preset
#      (ppo and ppo_rnn: Craftax_Baselines'; pqn_rnn: purejaxql's; ppo_rnd: Craftax_Baselines';
#      ppo_trxl: TransformerXL_PPO_JAX's; their 1e9 sizes) for 20,054,016 env steps, one seed
#      each, one evaluation at the end. Their schedules (learning rate, epsilon) run over these
#      steps, not over 1e9: a 2e7 run in the 1e9 configuration, beside the README's curves at
#      1e9 (PPO 11.9%, PPO-RNN 15.3%, PQN-RNN 16.0%, RND 12.0%, PPO-TrXL 18.3%). 2e7 is a guess
#      at what one 10-minute call holds for all five (no GPU has run it: the wall times will
#      say); the rows past the budget are named in skipped.txt for the next call's --only
#   2. minatar-rnn (issue 44): pqn_rnn's MinAtar presets (purejaxql's PQN MinAtar training
#      under pqn_rnn's MLP and GRU, canter's choice: no PQN-RNN MinAtar reference) at their 1e7
#      env steps, 4 seeds, the five games in turn (pqn's MinAtar rows took 49-83 s a game on an
#      H100 and 13-35 min on the 2-core CPU; pqn_rnn's Breakout ran 8,250 env steps/s over 4
#      seeds on that CPU, about 81 min a game, hence a GPU step)
#   3. craftax: PPO and PPO-RNN, Craftax_Baselines' presets on Craftax-Symbolic-v1, 1e6 env
#      steps, 4 seeds (the Craftax README's 1M table: PPO 2.2%, PPO-RNN 2.3%; the CPU's rows
#      are in the main table)
#   4. brax-hopper: ppo_continuous, sac and td3 on brax:hopper, 1e6 env steps, one seed, in
#      rejax's benchmark/hopper_1m.yaml settings as far as canter's flags reach them (rejax's
#      figure, A100: PPO 2 min 14 s, SAC 7 min 57 s, TD3 6 min 15 s; differences in
#      docs/notes/playground-reference.md section 5): the wall times go beside rejax's
#   5. dm-control: ppo_continuous's Playground preset on CartpoleBalance at its budget
#      (88,473,600 env steps), one seed
#   6. fast-td3: fast_td3's CheetahRun preset (FastTD3's DM Control configuration at its sizes:
#      1,024 envs, batches of 32,768, 1024-wide critics) for 10,240,000 env steps, 10,000 of
#      its 150,000 vector steps and 2 of its 30 evaluations, one seed: the return and the wall
#      time at that point of FastTD3's curve (its code logs wall time; what is reachable here
#      of its paper publishes none for CheetahRun)
#   7. board-games (issue 75): alphazero in pgx's own configuration (1,024 games x 256 plies an
#      iteration, 32 simulations, 6 blocks of 128 channels) on othello (its preset) and on
#      connect_four, 20 iterations (5,242,880 positions; pgx's curves run 400), one seed,
#      evaluated against uniformly random play; the CPU rows are canter's smaller
#      configurations
# --only takes a step or one row of it, STEP:ALGO (brax-hopper:td3).
# A step that would start after GPU_BUDGET_S seconds (default 600; none with --tiny) is skipped
# and named in skipped.txt: a lent device's session (15 minutes, calls of 10 at most) runs about
# one step, so run them in turn with --only, in this order. Rows go to <out>/returns, a returns
# table of their own (render_docs.py shows it).
#
# It installs nothing: a CUDA jax and benchmarks/gpu/requirements-gpu.txt (the suites' section too).
#
#   bash benchmarks/gpu/gpu_suites.sh                       # writes benchmarks/results/gpu/returns/
#   bash benchmarks/gpu/gpu_suites.sh --only craftax-1e9
#   bash benchmarks/gpu/gpu_suites.sh --only brax-hopper:sac brax-hopper:td3
#   bash benchmarks/gpu/gpu_suites.sh --tiny --out /tmp/suites   # tiny budgets, on any device
set -euo pipefail
cd "$(dirname "$0")/../.."

out=benchmarks/results/gpu
tiny=0
only=""
steps="craftax-1e9 minatar-rnn craftax brax-hopper dm-control fast-td3"
steps="$steps craftax-1e9:ppo craftax-1e9:ppo_rnn craftax-1e9:pqn_rnn craftax-1e9:ppo_rnd"
steps="$steps craftax-1e9:ppo_trxl"  # rows: STEP:ALGO
steps="$steps minatar-rnn:pqn_rnn craftax:ppo craftax:ppo_rnn"
steps="$steps brax-hopper:ppo_continuous brax-hopper:sac brax-hopper:td3"
steps="$steps dm-control:ppo_continuous fast-td3:fast_td3 board-games board-games:alphazero"
# shellcheck source=benchmarks/gpu/gpu_setup.sh
. benchmarks/gpu/gpu_setup.sh
gpu_args gpu_suites.sh "$@"
budget=${GPU_BUDGET_S:-600}
if ((tiny)) && [[ -z "${GPU_BUDGET_S:-}" ]]; then
    budget=1000000000  # a tiny run on a CPU takes what it takes
fi
python=${PYTHON:-python}

gpu_setup gpu_suites.sh "$tiny" craftax mujoco_playground brax gymnax equinox pgx mctx

rows="$out/returns"
mkdir -p "$rows"
rm -f "$out/skipped.txt"
if ((tiny)); then
    seeds=2
    craftax="total_timesteps=4096 num_envs=64 num_steps=32 eval_every=4096 num_eval_envs=2"
    hopper="total_timesteps=2048 eval_every=1024 num_eval_envs=2"
    hopper_off="$hopper learning_starts=512 buffer_size=4096"
    dm="total_timesteps=4096 num_envs=16 num_steps=128 eval_every=4096 num_eval_envs=2"
    fast="total_timesteps=2048 eval_every=1024 num_eval_envs=2 num_envs=16 batch_size=256"
    fast="$fast buffer_size=64 learning_starts=0 actor_hidden=16 critic_hidden=16"
    frontier="$craftax"
    trxl="grad_chunk=32"  # a chunk that divides the tiny rollout
    minatar="total_timesteps=512 num_envs=16 num_steps=16 num_minibatches=4 eval_every=512"
    minatar="$minatar num_eval_envs=2"
    board="total_timesteps=512 eval_every=512 num_eval_envs=2 selfplay_batch_size=16"
    board="$board max_num_steps=32 training_batch_size=64 num_channels=8 num_layers=1"
else
    seeds=4 craftax="" hopper="" hopper_off="" dm=""
    fast="total_timesteps=10240000"
    # 153 iterations of pqn_rnn's and ppo_trxl's 131,072 env steps, 306 of ppo's, ppo_rnn's
    # and ppo_rnd's 65,536
    frontier="total_timesteps=20054016 eval_every=20054016" trxl=""
    minatar=""
    board="total_timesteps=5242880 eval_every=1310720"
fi
# pgx's examples/alphazero configuration (algorithms/alphazero.py's PGX presets)
pgx_az="selfplay_batch_size=1024 max_num_steps=256 num_simulations=32 training_batch_size=4096"
pgx_az="$pgx_az num_channels=128 num_layers=6 opening_plies=0 num_eval_envs=1024"

step() {  # step NAME ALGO ENV SEEDS PRESET(0/1) FIELD=VALUE...: one returns.py row
    local name=$1 algo=$2 env=$3 num_seeds=$4 preset=$5
    shift 5
    if [[ -n "$only" && " $only " != *" $name "* && " $only " != *" $name:$algo "* ]]; then
        return
    fi
    if ((SECONDS > budget)); then
        echo "$name $algo $env: skipped, ${SECONDS} s in, past the ${budget} s budget" | tee -a "$out/skipped.txt"
        return
    fi
    local start=$SECONDS flags=()
    ((preset)) && flags+=(--presets)
    (($#)) && flags+=(--set "$@")
    echo "== $name: $algo $env" >&2
    "$python" benchmarks/returns/returns.py --algo "$algo" --envs "$env" --num-seeds "$num_seeds" \
        --out "$rows" "${flags[@]}"
    echo "== $name: $algo $env: $((SECONDS - start)) s" >&2
}

# shellcheck disable=SC2086  # the override lists split into words on purpose
for algo in ppo ppo_rnn pqn_rnn ppo_rnd; do
    # shellcheck disable=SC2086
    step craftax-1e9 "$algo" Craftax-Symbolic-v1-1e9 1 1 $frontier
done
# shellcheck disable=SC2086
step craftax-1e9 ppo_trxl Craftax-Symbolic-v1-1e9 1 1 $frontier $trxl
for game in Breakout SpaceInvaders Asterix Freeway Seaquest; do
    # shellcheck disable=SC2086
    step minatar-rnn pqn_rnn "$game-MinAtar" "$seeds" 1 $minatar
done
# shellcheck disable=SC2086
step craftax ppo Craftax-Symbolic-v1 "$seeds" 1 $craftax
# shellcheck disable=SC2086
step craftax ppo_rnn Craftax-Symbolic-v1 "$seeds" 1 $craftax
# rejax's hopper_1m.yaml settings: ppo_hopper, sac_hopper, td3_hopper
# shellcheck source=benchmarks/returns/physics_settings.sh
. benchmarks/returns/physics_settings.sh
# shellcheck disable=SC2086
step brax-hopper ppo_continuous brax:hopper 1 0 $ppo_hopper $hopper
# shellcheck disable=SC2086
step brax-hopper sac brax:hopper 1 0 $sac_hopper $hopper_off
# shellcheck disable=SC2086
step brax-hopper td3 brax:hopper 1 0 $td3_hopper $hopper_off
# shellcheck disable=SC2086
step dm-control ppo_continuous CartpoleBalance 1 1 $dm
# shellcheck disable=SC2086
step fast-td3 fast_td3 CheetahRun 1 1 $fast
# shellcheck disable=SC2086
step board-games alphazero othello 1 1 $board
# shellcheck disable=SC2086
step board-games alphazero pgx:connect_four 1 0 $pgx_az $board
echo "gpu_suites.sh: done in ${SECONDS} s, rows in $rows" >&2
