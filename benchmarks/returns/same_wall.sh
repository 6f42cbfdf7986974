#!/usr/bin/env bash
# fast_td3, sac and ppo_continuous on playground:CheetahRun for the same wall time on this CPU
# (issue 45), 4 seeds each in one program, through benchmarks/returns/returns.py into
# benchmarks/results/returns_wall (docs/results.md shows its table). fast_td3 runs first, for
# 131,072 env steps (12 minutes here); then each of the others trains for one evaluation
# interval (a probe: its env steps/s on this machine, now, evaluation included), and then for
# the whole number of intervals nearest to what that rate covers in fast_td3's training time
# (SAME_WALL_S seconds where set). Compiles are apart: the table's wall-time column is training
# and evaluation, what each run took; the probes write to directories of their own (removed
# after) and share the persistent compilation cache with the runs.
#   - fast_td3: FastTD3's DM Control configuration (`--preset CheetahRun`: n-step 3, atoms on
#     [-500, 500], gamma 0.97, noise std from U(0.1, 0.4), smoothing 0.1, 2 critic updates per
#     vector step, 10,240 replay rows per env) with sac's 16 envs and batches of 512, FastTD3's
#     32 transitions per env (64 replayed per env step, as FastTD3's); updates from the 12th
#     vector step as FastTD3's; 128- and 256-wide networks (FastTD3's 512 and 1024 cost 13x the
#     critic's multiply-adds per sample). 4 evaluations.
#   - sac and ppo_continuous: the CPU configurations of benchmarks/returns/cpu_physics.sh (sac:
#     16 envs, an update of 128 per env step, 64 x 64 networks, evaluated every 65,536 env steps;
#     ppo_continuous: 64 envs x 128 steps, 10 epochs of 32 minibatches, every 524,288).
# 16 evaluation episodes each time.
#
#   bash benchmarks/returns/same_wall.sh         # 53 minutes here, compiles and probes included
#   SAME_WALL_S=600 bash benchmarks/returns/same_wall.sh --only sac
set -euo pipefail
cd "$(dirname "$0")/../.."

only=" ${*:2} "
[[ "${1:-}" == "--only" ]] || only=""
python=${PYTHON:-python}
out=benchmarks/results/returns_wall
evals="num_eval_envs=16"
JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$(mktemp -d)}
export JAX_COMPILATION_CACHE_DIR

wanted() { [[ -z "$only" || "$only" == *" $1 "* ]]; }

run() {  # run ALGO ENV-OR-PRESET OUT RETURNS.PY-FLAGS...: one row
    local algo=$1 env=$2 dir=$3
    shift 3
    "$python" benchmarks/returns/returns.py --algo "$algo" --num-seeds 4 --envs "$env" \
        --out "$dir" "$@"
}

field() {  # field JSON KEY: one value of a returns.py record
    "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

matched() {  # matched ALGO INTERVAL FIELD=VALUE...: a one-interval probe, then $seconds' worth
    local algo=$1 interval=$2 probe record steps
    shift 2
    wanted "$algo" || return 0
    probe=$(mktemp -d)
    run "$algo" playground:CheetahRun "$probe" --set "$@" total_timesteps="$interval" \
        eval_every="$interval"
    record="$probe/${algo}__playground-CheetahRun.json"
    steps=$("$python" -c 'import sys; done, took, wall, every = map(float, sys.argv[1:])
print(max(1, round(done / took * wall / every)) * int(every))' \
        "$(field "$record" env_steps)" "$(field "$record" run_s)" "$seconds" "$interval")
    rm -rf "$probe"
    echo "same_wall.sh: $algo for $steps env steps, to match $seconds s" >&2
    run "$algo" playground:CheetahRun "$out" --set "$@" total_timesteps="$steps" \
        eval_every="$interval"
}

# 8,192 vector steps of 16 envs
if wanted fast_td3; then
    run fast_td3 CheetahRun "$out" --presets --set num_envs=16 batch_size=512 \
        learning_starts=160 actor_hidden=128 critic_hidden=256 total_timesteps=131072 \
        eval_every=32768 "$evals"
fi
if [[ -z "${SAME_WALL_S:-}" && ! -e "$out/fast_td3__CheetahRun.json" ]]; then
    echo "same_wall.sh: no fast_td3 row in $out to match: run it first, or set SAME_WALL_S" >&2
    exit 2
fi
seconds=${SAME_WALL_S:-$(field "$out/fast_td3__CheetahRun.json" run_s)}
matched sac 65536 num_envs=16 train_frequency=1 "$evals"
matched ppo_continuous 524288 num_envs=64 num_steps=128 gamma=0.99 "$evals"
