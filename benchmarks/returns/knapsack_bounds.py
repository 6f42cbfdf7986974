"""What Jumanji's Knapsack-v1 instances allow: the optimum and the value-per-weight greedy fill.

Jumanji publishes no number for its own trained agents on Knapsack-v1 (its docs, README and
training configs give curves only), so canter's row sets its return beside two bounds
measured here on the same instance distribution (Jumanji's generator: 50 items, weights and
values uniform on [0, 1], capacity 12.5; the return is the total value packed):

- **optimum**: the 0/1 knapsack of each instance solved exactly (scipy's MILP solver, HiGHS);
- **greedy**: items by value per weight, each packed if it still fits (a classic baseline that
  needs no learning).

    python benchmarks/returns/knapsack_bounds.py --instances 2000

Writes `results/knapsack_bounds.json` and `.md` (means and stds over the instances).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from canter.common.run.files import atomic_write, write_json  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "results"


def instances(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Weights and values `[count, items]` from Jumanji's own reset, and the capacity."""
    import jax
    import jumanji

    env = jumanji.make("Knapsack-v1")
    keys = jax.random.split(jax.random.key(seed), count)
    state, _ = jax.jit(jax.vmap(env.reset))(keys)
    return np.asarray(state.weights), np.asarray(state.values), float(env.total_budget)


def optimum(weights: np.ndarray, values: np.ndarray, capacity: float) -> float:
    """The most value that fits: a 0/1 integer program, solved exactly."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    items = len(values)
    solution = milp(
        -values,
        constraints=LinearConstraint(weights[None], -np.inf, capacity),
        integrality=np.ones(items),
        bounds=Bounds(0, 1),
    )
    if not solution.success:
        raise RuntimeError(f"the MILP solver failed: {solution.message}")
    return float(values @ np.round(solution.x))


def greedy(weights: np.ndarray, values: np.ndarray, capacity: float) -> float:
    """Items in order of value per weight, each packed if it still fits."""
    total, room = 0.0, capacity
    for i in np.argsort(-values / weights):
        if weights[i] <= room:
            total, room = total + values[i], room - weights[i]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    weights, values, capacity = instances(args.instances, args.seed)
    best = np.array([optimum(w, v, capacity) for w, v in zip(weights, values, strict=True)])
    fill = np.array([greedy(w, v, capacity) for w, v in zip(weights, values, strict=True)])
    record = {
        "env": "jumanji:Knapsack-v1",
        "instances": args.instances,
        "seed": args.seed,
        "items": int(weights.shape[1]),
        "capacity": capacity,
        "optimum_mean": float(best.mean()),
        "optimum_std": float(best.std()),
        "greedy_mean": float(fill.mean()),
        "greedy_std": float(fill.std()),
    }
    write_json(args.out / "knapsack_bounds.json", record)
    table = [
        "| Knapsack-v1 bound | mean total value | std | instances |",
        "|---|---:|---:|---:|",
        f"| optimum (0/1 MILP) | {best.mean():.2f} | {best.std():.2f} | {args.instances:,} |",
        f"| value-per-weight greedy | {fill.mean():.2f} | {fill.std():.2f} | {args.instances:,} |",
    ]
    atomic_write(args.out / "knapsack_bounds.md", "\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
