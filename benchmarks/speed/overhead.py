"""Overhead of run management: a run writing metrics and checkpoints against one writing nothing.

Runs PPO on CartPole-v1 (defaults, 5e5 env steps) in fresh processes, alternating A B A B, and
prints the median run time of each and their ratio (compile time excluded).

    python benchmarks/speed/overhead.py --repeats 3 --checkpoint-every 1
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

WORKER = """
import json, sys
from pathlib import Path
from canter.algorithms import ppo, trainer
run_dir = None if sys.argv[1] == "-" else Path(sys.argv[1])
config = ppo.Config(num_seeds=int(sys.argv[3]))
result = trainer.run(config, ppo.make_train, algo="ppo", run_dir=run_dir,
                     checkpoint_every=int(sys.argv[2]), verbose=False)
print(json.dumps({k: result.summary[k] for k in ("run_s", "host_s", "compile_s")}))
"""


def measure(run_dir: str, checkpoint_every: int, num_seeds: int) -> dict:
    command = [sys.executable, "-c", WORKER, run_dir, str(checkpoint_every), str(num_seeds)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--checkpoint-every", type=int, default=1, help="intervals (20 in all)")
    parser.add_argument("--num-seeds", type=int, default=1)
    args = parser.parse_args()
    bare, managed = [], []
    for repeat in range(args.repeats):
        bare.append(measure("-", args.checkpoint_every, args.num_seeds))
        with tempfile.TemporaryDirectory() as run_dir:
            managed.append(measure(run_dir, args.checkpoint_every, args.num_seeds))
        print(
            f"repeat {repeat}: bare {bare[-1]['run_s']:.2f} s, managed "
            f"{managed[-1]['run_s']:.2f} s (host work {managed[-1]['host_s']:.3f} s)"
        )
    bare_s = statistics.median(r["run_s"] for r in bare)
    managed_s = statistics.median(r["run_s"] for r in managed)
    pair_ratios = [m["run_s"] / b["run_s"] for b, m in zip(bare, managed, strict=True)]
    print(
        f"median run time: bare {bare_s:.2f} s, with metrics files + checkpoints every "
        f"{args.checkpoint_every} interval(s) {managed_s:.2f} s"
    )
    print(
        f"ratio managed / bare: {managed_s / bare_s:.3f} (per pair: "
        f"{', '.join(f'{r:.3f}' for r in pair_ratios)})"
    )


if __name__ == "__main__":
    main()
