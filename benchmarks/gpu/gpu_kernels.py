"""Kernel launches on a GPU, counted in the program XLA compiles for one, on any machine.

A PPO MinAtar iteration at one seed is thousands of small kernels, each a few microseconds on
an H100, so on a GPU its time follows the number of kernels it launches. This script compiles
the programs of benchmarks/speed/profile_ops.py for an NVIDIA H100 without a GPU (JAX's deviceless
ahead-of-time compilation: the CUDA plugin and a description of the target instead of a
device) and reads the optimised program: every fusion, library call (cuBLAS, cuSOLVER), copy
and other op that XLA runs as its own kernel counts once per run; a loop counts its body (and
its condition) once per trip where XLA knows the trip count, once where it does not (the
evaluation's "all done?" loops); a conditional counts its largest branch. Counts are exact for
the program, the same on every run and machine: a check that needs no GPU and has no noise.
What they leave out: a kernel's own run time (large matmuls), the host's work between kernels,
and CUDA graphs (XLA's command buffers, decided after this program).

`--work ppo-minatar`: canter's PPO against rejax's (speed_minatar.py's setup), per training
iteration, with the loops inside one; `--work dqn-minatar`: canter's DQN MinAtar preset per env
step, with and without its update.

    pip install --target /tmp/cuda-aot "jax-cuda12-plugin[with-cuda]==0.10.2"   # ~5 GB
    python benchmarks/gpu/gpu_kernels.py --plugin-dir /tmp/cuda-aot --work ppo-minatar --seeds 1 16

Writes benchmarks/results/gpu_kernels_<work>.md and .json.
"""

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

# An H100 SXM as XLA describes a GPU (its stream executor's device description).
H100 = """
gpu_device_info {
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 threads_per_core_limit: 2048 core_count: 132
  fpus_per_core: 128 block_dim_limit_x: 2147483647 block_dim_limit_y: 65535
  block_dim_limit_z: 65535 memory_bandwidth: 3352320000000 l2_cache_size: 52428800
  clock_rate_ghz: 1.98 device_memory_size: 84929347584 shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 } registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 7 }
runtime_version { major: 12 minor: 8 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""
# Ops that launch nothing: they name, bundle or reinterpret buffers.
FREE = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all"}
FREE |= {"opt-barrier", "add-dependency", "partition-id", "replica-id"}
CALLS = ("condition", "body", "to_apply", "calls", "true_computation", "false_computation")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? ([a-z][\w-]*)\((.*)$")
_COMPUTATION = re.compile(r"^(ENTRY )?%(\S+) ")


def parse(hlo: str) -> tuple[dict[str, list[dict]], str]:
    """An optimised HLO module's computations (`name -> instructions`, each with its name, op,
    called computations and known trip count) and the entry computation's name."""
    computations, current, entry = defaultdict(list), None, ""
    for line in hlo.splitlines():
        if line and not line.startswith(" "):
            if found := _COMPUTATION.match(line):
                current = found.group(2)
                entry = current if found.group(1) else entry
            continue
        if current and (found := _INSTRUCTION.match(line)):
            name, op, rest = found.groups()
            calls = dict(re.findall(rf"\b({'|'.join(CALLS)})=%([\w.\-]+)", rest))
            if branches := re.search(r"branch_computations=\{([^}]*)\}", rest):
                calls["branches"] = [b.strip().lstrip("%") for b in branches.group(1).split(",")]
            trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest)
            instruction = dict(name=name, op=op, calls=calls, trips=trips and int(trips.group(1)))
            computations[current].append(instruction)
    return dict(computations), entry


def launches(computations: dict, name: str, memo: dict | None = None, pick=max) -> int:
    """Kernels one run of computation `name` launches (the counting of the module docstring;
    `pick` chooses among a conditional's branches)."""
    memo = {} if memo is None else memo
    if name not in memo:
        total = 0
        for instruction in computations[name]:
            op, calls = instruction["op"], instruction["calls"]
            if op in FREE:
                continue
            if op == "while":
                trip = launches(computations, calls["body"], memo, pick)
                trip += launches(computations, calls["condition"], memo, pick)
                total += (instruction["trips"] or 1) * trip
            elif op == "conditional":
                branches = calls.get("branches") or [
                    calls[k] for k in ("true_computation", "false_computation")
                ]
                total += pick(launches(computations, b, memo, pick) for b in branches)
            elif op == "call":
                total += launches(computations, calls["to_apply"], memo, pick)
            else:  # a fusion, a library call or a lone op: one kernel
                total += 1
        memo[name] = total
    return memo[name]


def loops(computations: dict, name: str, depth: int = 0, pick=max) -> list[dict]:
    """Every loop reachable from computation `name` in program order, nested ones after the
    loop that holds them (`depth`): its trip count (None: unknown) and launches per trip."""
    found = []
    for instruction in computations[name]:
        calls = instruction["calls"]
        if instruction["op"] == "while":
            body, condition = calls["body"], calls["condition"]
            per_trip = launches(computations, body, None, pick)
            per_trip += launches(computations, condition, None, pick)
            found.append(dict(depth=depth, trips=instruction["trips"], per_trip=per_trip))
            found += loops(computations, body, depth + 1, pick)
        else:
            for called in calls.get("branches", []) + [calls.get("to_apply")]:
                if called in computations and instruction["op"] in ("conditional", "call"):
                    found += loops(computations, called, depth, pick)
    return found


def per_unit(computations: dict, entry: str, size: int, pick=max) -> tuple[int, list[dict]]:
    """The launches of one unit of work: the outermost loop that runs `size` trips (the
    training program's iterations or env steps) per trip, and the loops inside it."""
    found = loops(computations, entry, pick=pick)
    runs = [i for i, loop in enumerate(found) if loop["trips"] == size]
    if not runs:
        raise SystemExit(f"no loop of {size} trips in the program: its loops are {found}")
    i = max(runs, key=lambda i: found[i]["per_trip"])  # the one that holds the others
    inside = []
    for inner in found[i + 1 :]:
        if inner["depth"] <= found[i]["depth"]:
            break
        inside.append(inner | {"depth": inner["depth"] - found[i]["depth"] - 1})
    return found[i]["per_trip"], inside


def h100_sharding():
    """A one-device sharding on a described H100 (deviceless compilation)."""
    from jax.experimental import topologies
    from jax.sharding import NamedSharding, PartitionSpec

    topology = topologies.get_topology_desc(platform="cuda", target_config=H100, topology="1x1x1")
    return NamedSharding(topologies.make_mesh(topology, (1,), ("device",)), PartitionSpec())


def count(work: str, seeds: int) -> dict:
    """Per side: the launches of one unit of work and its loops, at `seeds` vmapped seeds. For
    DQN the two sides are one program, canter's preset updating from its first step: its env
    step with the update (the conditional's larger branch) and without (the smaller), counted
    as the difference between runs of 600 and 300 env steps (its step loop may be unrolled)."""
    import dataclasses

    import jax
    from canter.algorithms import dqn

    from benchmarks.speed import profile_ops, speed_dqn

    keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), seeds))
    keys = jax.ShapeDtypeStruct(keys.shape, keys.dtype, sharding=h100_sharding())

    def compiled(train: Callable) -> tuple[dict, str]:
        return parse(jax.jit(jax.vmap(train)).lower(keys).compile().as_text())

    if work == "dqn-minatar":
        programs = {}
        for steps in (300, 600):
            config = dataclasses.replace(speed_dqn.minatar_config(steps), learning_starts=0)
            programs[steps] = compiled(dqn.make_train(config))
        sides = {}
        for side, pick in {"canter, with its update": max, "canter, acting only": min}.items():
            total = {n: launches(*programs[n], pick=pick) for n in programs}
            sides[side] = dict(launches=(total[600] - total[300]) / 300, loops=[])
        return sides
    size = 7  # iterations: a trip count no other loop of the program has
    trains, _ = profile_ops.programs(work, size)
    sides = {}
    for side, train in trains.items():
        unit, inside = per_unit(*compiled(train), size)
        sides[side] = dict(launches=unit, loops=inside)
    return sides


def table(record: dict) -> str:
    """Launches per unit of work for each seed count, and the loops inside one unit."""
    unit = {"ppo-minatar": "training iteration", "dqn-minatar": "env step"}[record["work"]]
    sides = list(next(iter(record["seeds"].values())))
    lines = [f"Kernel launches per {unit}, compiled for {record['target']} (deviceless)", ""]
    ratio = f" {sides[0]} / {sides[1]} |" if len(sides) == 2 else ""
    lines += [f"| seeds | {' | '.join(sides)} |{ratio}", "|---:|" + "---:|" * (len(sides) + 1)]
    for seeds, row in record["seeds"].items():
        counts = [row[side]["launches"] for side in sides]
        cells = " | ".join(f"{c:,.0f}" if c == round(c) else f"{c:,.1f}" for c in counts)
        lines.append(f"| {seeds} | {cells} | {counts[0] / counts[1]:.2f} |")
    first = next(iter(record["seeds"].values()))
    if not any(first[side]["loops"] for side in sides):
        return "\n".join(lines + ["", f"Compiled on: {record['machine']}."]) + "\n"
    lines += ["", f"The loops inside one {unit} ({next(iter(record['seeds']))} seed):", ""]
    lines += ["| side | loop | trips | launches per trip |", "|---|---|---:|---:|"]
    for side in sides:
        holders = []  # the loops that hold the current one, innermost last
        for i, loop in enumerate(first[side]["loops"], start=1):
            del holders[loop["depth"] :]
            label = f"loop {i}" + (f", in loop {holders[-1]}" if holders else "")
            lines.append(f"| {side} | {label} | {loop['trips']} | {loop['per_trip']} |")
            holders.append(i)
    lines += ["", f"Compiled on: {record['machine']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", choices=("ppo-minatar", "dqn-minatar"), default="ppo-minatar")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--plugin-dir", type=Path, help="where jax-cuda12-plugin is installed")
    parser.add_argument("--out", type=Path, default=harness.RESULTS, help="where results go")
    args = parser.parse_args()
    if args.plugin_dir:
        sys.path.insert(0, str(args.plugin_dir.resolve()))
    # The host stays JAX's platform; the CUDA plugin only compiles (no device to check).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    seeds = {str(n): count(args.work, n) for n in args.seeds}
    record = dict(machine=harness.machine(), target="an NVIDIA H100", work=args.work)
    record["seeds"] = seeds
    text = table(record)
    args.out.mkdir(parents=True, exist_ok=True)
    harness.write(args.out / f"gpu_kernels_{args.work}.json", json.dumps(record, indent=1))
    harness.write(args.out / f"gpu_kernels_{args.work}.md", text)
    print(text)


if __name__ == "__main__":
    main()
