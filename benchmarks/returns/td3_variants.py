"""td3.py with one of sbx's choices swapped in, on a MuJoCo preset: does it explain a gap?

sbx's TD3 differs from the TD3 paper and CleanRL (which td3.py follows) in two places besides
its Flax networks: its target networks follow at every critic update, not with the delayed
actor, and its actor maximises the smaller of the two critics, not the first. Flax also starts
from another initialisation (LeCun-normal weights, zero biases; PyTorch's and Equinox's draw
both uniformly in +-1/sqrt(fan_in)). Each is a Config flag of td3.py (`delayed_targets`,
`actor_min_q`, `lecun_init`); a variant here names a set of them, and runs as td3.py under
the name `td3_<variant>` through `returns.py`'s `run_one`. The seeds equal td3.py's seeds, so
warm-up data (and for `sbxrule` the initial networks) are the same, and the table pairs each
variant's seeds with td3.py's runs of the same preset and budget in `results/returns*/`.

    python benchmarks/returns/td3_variants.py --variant sbxrule --seed 2    # seeds 2 and 3
    python benchmarks/returns/td3_variants.py --table-only
"""

import argparse
import functools
import itertools
import json
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from canter.common.run.files import atomic_write  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
OUT = RESULTS / "td3_variants"

# td3.py's flags each variant sets; the rest keep their defaults (the TD3 paper, CleanRL).
VARIANTS = {
    # sbx (sbx/td3/td3.py): soft-update both targets after every critic step, actor on min(Q).
    "sbxrule": dict(delayed_targets=False, actor_min_q=True),
    # Flax's Dense default: LeCun-normal (truncated) weights, zero biases, for actor and critics.
    "flaxinit": dict(lecun_init=True),
}


def load_variant(name: str) -> str:
    """Register td3.py with `name`'s flags as module `canter.algorithms.td3_<name>` (what
    `run_one` imports; its results are filed under that name); return the name."""
    from canter.algorithms import td3

    algo = f"td3_{name}"
    module = types.ModuleType(f"canter.algorithms.{algo}", f"td3.py with {VARIANTS[name]}")
    module.Config = functools.partial(td3.Config, **VARIANTS[name])
    module.make_train, module.PRESETS = td3.make_train, td3.PRESETS
    sys.modules[module.__name__] = module
    return algo


def paired_p(differences: list[float]) -> float:
    """Two-sided exact sign-flip test of mean(differences) = 0 (paired by seed)."""
    observed = abs(np.mean(differences))
    flips = itertools.product((1.0, -1.0), repeat=len(differences))
    means = [abs(np.mean(np.multiply(signs, differences))) for signs in flips]
    return float(np.mean(np.asarray(means) >= observed - 1e-9))


def _rows(out: Path, algo: str) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(out.glob(f"*/{algo}__*.json"))]


def table(out: Path = OUT, results: Path = RESULTS, last: int = 5) -> str:
    """Markdown: per variant, env and budget, its seeds' last-`last` means beside td3.py's."""
    from benchmarks.returns.peer_returns import canter_curves, spread, tail_means

    lines = [
        f"| variant | env | env steps | seeds | final return: mean (per seed) | last {last} "
        f"evaluations: mean (per seed) | td3.py, same seeds: last {last} | variant - td3.py: "
        "mean (sign-flip p) |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for name in VARIANTS:
        runs = {(r["env"], r["env_steps"]) for r in _rows(out, f"td3_{name}")}
        for env, steps in sorted(runs):
            curves = canter_curves(f"td3_{name}", env, steps, out, folders="*")
            base = canter_curves("td3", env, steps, results)
            seeds = sorted(curves)
            tails = tail_means(curves, seeds, last)
            paired = [s for s in seeds if s in base]
            base_tails = tail_means(base, paired, last)
            diffs = list(np.subtract(tail_means(curves, paired, last), base_tails))
            base_cell = spread(base_tails) if paired else ""
            test = f"{np.mean(diffs):+,.0f} (p = {paired_p(diffs):.2f})" if paired else ""
            finals = spread([curves[s][-1] for s in seeds])
            lines.append(
                f"| {name} | {env} | {steps:,} | {', '.join(map(str, seeds))} | {finals} | "
                f"{spread(tails)} | {base_cell} | {test} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="sbxrule")
    parser.add_argument("--env", default="Hopper-v5", help="a MuJoCo preset name")
    parser.add_argument("--seed", type=int, default=0, help="the first of --num-seeds seeds")
    parser.add_argument("--num-seeds", type=int, default=2)
    parser.add_argument("--total-timesteps", type=int, default=300_000)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if not args.table_only:
        from benchmarks.returns.returns import run_one

        algo = load_variant(args.variant)
        # One directory per (variant, first seed), as returns.py's --out for a batch of seeds.
        out = OUT / f"{args.variant}_seed{args.seed}"
        overrides = {"total_timesteps": args.total_timesteps, "seed": args.seed}
        run_one(algo, args.env, args.num_seeds, overrides, out, preset=True)
    atomic_write(OUT / "td3_variants.md", table())
    print(table())


if __name__ == "__main__":
    main()
