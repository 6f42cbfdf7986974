#!/usr/bin/env bash
# The GPU rows of docs/speed.md: every head-to-head of issue 27 on one GPU, in about 8 minutes.
#
# Runs, each as fresh processes taking turns (benchmarks/harness.py), in this order (the names
# are what --only takes):
#   1. ppo-minatar: PPO Breakout-MinAtar, gymnax-blines config, 100 iterations (819,200 env steps per seed):
#      canter's CLI runner and pure jit against rejax, 1 and 16 seeds  (speed_minatar.py)
#   2. ppo-cartpole: PPO CartPole-v1, PureJaxRL config, 1000 iterations (512,000 env steps), 1 and 64 seeds
#      (speed_ppo.py)
#   3. dqn-minatar: DQN MinAtar preset, Breakout, 30,000 env steps, against random actions in one env
#      (speed_dqn.py --minatar)
#   4. dqn-cartpole: DQN CartPole-v1, PureJaxRL config, 500,000 env steps, 1 seed  (speed_dqn.py)
#   5. pqn-minatar: PQN MinAtar preset, Breakout, 50 iterations, against random actions  (speed_minatar.py)
#   6. runner: the runner's cost at the default interval: PPO CartPole, 1000 iterations, the CLI runner
#      with and without overlap against the pure program  (runner_overhead.py)
#   then runner-split (second, after ppo-minatar): where the runner's extra time goes, PPO
#      MinAtar (100 iterations) and PPO CartPole (300), in one process: the pure program, plain
#      jitted interval programs with and without vmap, the runner's two programs in a plain
#      loop, the runner (runner_split.py; three rounds, whatever --repeats;
#      with --tiny, CartPole alone and one round)
# then benchmarks/gpu/gpu_summary.py's one table (summary.md) of every result in the directory, and
# last, with whatever time the budget leaves:
#   7. profile-ppo: where a PPO MinAtar iteration's time goes, kernel by kernel, canter's program
#      and rejax's traced with jax.profiler in one process, 4 iterations (profile_ops.py)
#   8. profile-dqn: the same for a DQN MinAtar env step, canter's preset against itself without
#      updates, 1,000 env steps (profile_ops.py --work dqn-minatar)
#   Neither with --tiny: tests/test_benchmarks.py checks how they read CPU and GPU traces, and
#   their CPU runs are in docs/speed.md
# Two rounds each. A step that would start after GPU_BUDGET_S seconds (default 420; none with --tiny
# unless it is set) is skipped and named in skipped.txt: run it later with --only (results of
# earlier steps stay in the directory). On an H100 a fresh process costs 5-8 s before it
# compiles and a cold compile of PPO MinAtar 15-20 s, so the workers share a persistent
# compilation cache (a temporary directory; BENCH_COMPILE_CACHE=DIR names another): compile
# times after a program's first round are cache hits. Run times are unaffected.
#
# It installs nothing: it needs a CUDA build of jax (0.10 or 0.11) and the packages listed in
# benchmarks/gpu/requirements-gpu.txt (canter's own dependencies and rejax), installed ahead of
# time.
# canter itself need not be installed: the checkout is put on the path when it is not.
#
#   bash benchmarks/gpu/gpu.sh                          # writes benchmarks/results/gpu/
#   bash benchmarks/gpu/gpu.sh --out DIR
#   bash benchmarks/gpu/gpu.sh --only dqn-minatar pqn-minatar
#   bash benchmarks/gpu/gpu.sh --tiny --out /tmp/gpu    # every step at tiny sizes, on any device
#
# Then, with the GPU's results in the checkout: python benchmarks/render_docs.py
set -euo pipefail
cd "$(dirname "$0")/../.."

out=benchmarks/results/gpu
tiny=0
only=""
steps="ppo-minatar runner-split ppo-cartpole dqn-minatar dqn-cartpole pqn-minatar runner profile-ppo profile-dqn"
# shellcheck source=benchmarks/gpu/gpu_setup.sh
. benchmarks/gpu/gpu_setup.sh
gpu_args gpu.sh "$@"
budget=${GPU_BUDGET_S:-420}
if ((tiny)) && [[ -z "${GPU_BUDGET_S:-}" ]]; then
    budget=1000000000  # a tiny run on a CPU takes what it takes (CI's 2 cores passed 420 s)
fi
python=${PYTHON:-python}

gpu_setup gpu.sh "$tiny" gymnax distrax tyro rejax equinox optax

if ((tiny)); then
    # One seed count per head-to-head (2: the vmapped path) and one runner-split setup, one
    # round: each fresh process costs a cold start and a compile on a CPU, and CI runs this.
    repeats=1 ppo_seeds="2" minatar_iterations=2 cartpole_seeds="2" cartpole_iterations=4
    dqn_minatar_steps=400 dqn_steps=2000 pqn_iterations=2 runner_iterations=4 runner_cadence=2
    split_setups="cartpole" split_iterations="4" split_repeats=1
else
    repeats=2 ppo_seeds="1 16" minatar_iterations=100 cartpole_seeds="1 64" cartpole_iterations=1000
    dqn_minatar_steps=30000 dqn_steps=500000 pqn_iterations=50 runner_iterations=1000
    runner_cadence=50 split_setups="minatar cartpole" split_iterations="100 300" split_repeats=3
fi
mkdir -p "$out"
rm -f "$out/skipped.txt"
if [[ -z "${BENCH_COMPILE_CACHE:-}" ]]; then
    BENCH_COMPILE_CACHE=$(mktemp -d)
    export BENCH_COMPILE_CACHE
fi

step() {  # step NAME COMMAND...: run it unless --only leaves it out or the budget is spent
    local name=$1
    shift
    if [[ -n "$only" && " $only " != *" $name "* ]]; then
        return
    fi
    if ((SECONDS > budget)); then
        echo "$name: skipped, ${SECONDS} s in, past the ${budget} s budget" | tee -a "$out/skipped.txt"
        return
    fi
    local start=$SECONDS
    echo "== $name" >&2
    "$python" "$@" --out "$out" --repeats "${STEP_REPEATS:-$repeats}"
    echo "== $name: $((SECONDS - start)) s" >&2
}

# shellcheck disable=SC2086  # the seed lists split into words on purpose
step ppo-minatar benchmarks/speed/speed_minatar.py --algo ppo --seeds $ppo_seeds \
    --ppo-iterations "$minatar_iterations"
# shellcheck disable=SC2086
STEP_REPEATS=$split_repeats step runner-split benchmarks/speed/runner_split.py \
    --setup $split_setups --iterations $split_iterations
# shellcheck disable=SC2086
step ppo-cartpole benchmarks/speed/speed_ppo.py --seeds $cartpole_seeds \
    --iterations "$cartpole_iterations"
step dqn-minatar benchmarks/speed/speed_dqn.py --minatar "$dqn_minatar_steps"
step dqn-cartpole benchmarks/speed/speed_dqn.py --seeds 1 --steps "$dqn_steps"
step pqn-minatar benchmarks/speed/speed_minatar.py --algo pqn --pqn-iterations "$pqn_iterations"
step runner benchmarks/speed/runner_overhead.py --iterations "$runner_iterations" \
    --cadences "$runner_cadence"
"$python" benchmarks/gpu/gpu_summary.py "$out"
if ((!tiny)); then
    step profile-ppo benchmarks/speed/profile_ops.py --work ppo-minatar --size 4
    step profile-dqn benchmarks/speed/profile_ops.py --work dqn-minatar --size 1000
fi
echo "gpu.sh: done in ${SECONDS} s, results in $out" >&2
