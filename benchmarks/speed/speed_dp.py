"""One seed's envs over the CPU devices (`--data-parallel`) against one device and rejax: PPO.

PureJaxRL's CartPole PPO (speed_ppo.py's config) with 1024 envs x 16 steps (16,384 env steps
per iteration) for 100 iterations, 1,638,400 env steps, one seed, in fresh processes taking
turns (benchmarks/harness.py):
- `canter`: the CLI runner on one device;
- `canter-dp`: the CLI runner with `--data-parallel`: the seed's envs and minibatches over the
  CPU devices, one per core;
- `canter-1core`: the CLI runner on one device pinned to one core;
- `rejax`: `jax.jit(jax.vmap(algo.train))` (benchmarks/speed/rejax_peer.py).
Half of `canter-1core`'s run time is what a perfect split over two cores would take, so its
ratio to rejax bounds every multi-device speed-up on a 2-core machine; the table's notes give
that bound per round.

    pip install -e ".[bench]"
    python benchmarks/speed/speed_dp.py --seeds 1

Writes benchmarks/results/speed_ppo-dp.md and speed_ppo-dp.json.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import speed_ppo  # noqa: E402

SCRIPT = __file__
SETUP = dict(speed_ppo.CARTPOLE, num_envs=1024, num_steps=16, iterations=100)
IMPLS = harness.impls("canter", "canter-dp", one_core=True)


def work(impl: str, num_seeds: int) -> dict:
    """The worker: `--worker IMPL SEEDS`."""
    return speed_ppo.measure(impl, SETUP, num_seeds, "ppo-dp")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    print(f"head to head, {harness.machine()}", flush=True)
    rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, IMPLS)
    harness.report(args.out, "speed_ppo-dp", rows, IMPLS)


if __name__ == "__main__":
    main()
