"""Where a training program's time goes, op by op, traced with `jax.profiler` in one process.

`--work ppo-minatar` (the default): canter's PPO program against rejax's on speed_minatar.py's
setup (gymnax-blines' MinAtar PPO on Breakout-MinAtar, one seed, `jit(vmap(train))`, 8
evaluation episodes at the end), per iteration. `--work dqn-minatar`: canter's DQN MinAtar
preset (Breakout, one env, an update of 32 samples per env step after a warm-up of a tenth of
the run) against the same preset that never leaves its warm-up (acting and the buffer write
only), per env step: the difference is the update (issue 27's DQN target is env steps/s).

Each program is compiled, run once, and then run `--repeats` times under `jax.profiler`, the
two taking turns. On XLA:CPU the trace holds one event per executed thunk (an op or a fusion of
the optimised program, or a loop's own control), on a GPU one per kernel, named by the op that
launched it; this script sums each op's self time (its duration less the ops it waits on, per
thread or stream), counts the ops run, and sorts the ops into kinds by what the optimised
program says they compute:

- `matmul`: a dot, a fusion around one (XNNPACK's `ynn_fusion`, XLA's `*dot*` fusions, a
  Triton gemm) or a call of cuBLAS's gemm;
- `copy & transpose`: a copy, transpose or concatenation, or a fusion whose root is one;
- `sort`, `gather & scatter`, `loop control` (while, conditional, call);
- `other`: every other fusion and op (the elementwise work, reductions, the random bits).

What the totals leave out: a matmul that XLA runs with its own Eigen kernel (here the first
layers' weight gradients, `[1024, 400]` by `[1024, 256]`) is dispatched to the thread pool and
its event closes before the work is done, so its time is missing from every kind; XNNPACK's
matmuls (`ynn_fusion`) are timed whole. Self times add up over threads, and independent ops run
at once (XLA:CPU starts independent thunks together), so a smaller total is not a shorter run
unless the wall time says so. The table gives the wall time of the traced run and of an
untraced one, and the process CPU time of the untraced one (both cores' work, everything in).

For PPO, beside the table: the iteration's matmul work in GFLOP (counted from the config), the
rate the whole run does it at, and this machine's rate for the same shapes alone.

    python benchmarks/speed/profile_ops.py --work ppo-minatar --size 4 --repeats 5
    python benchmarks/speed/profile_ops.py --work dqn-minatar --size 1000 --repeats 3

Writes benchmarks/results/profile_<work>.md and .json (per kind and per top op, in ms per
iteration or env step, the median over the rounds).
"""

import dataclasses
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import speed_dqn, speed_minatar, speed_ppo  # noqa: E402

WORKS = {  # the two sides and what a unit of work is
    "ppo-minatar": (("canter", "rejax"), "iteration"),
    "dqn-minatar": (("canter", "canter, no updates"), "env step"),
}
SIZES = {"ppo-minatar": 4, "dqn-minatar": 1000}  # iterations, env steps (traces fit: `traced`)
KINDS = ("matmul", "copy & transpose", "sort", "gather & scatter", "loop control", "other")
# Trace events that are the executor's or the thread pool's, not an op of the program.
NOT_OPS = ("$", "ThunkExecutor", "SlinkyThreadPool", "ThreadpoolListener", "end: ")
LOOPS = ("while", "conditional", "call")
TOP = 8  # ops named in the table, per side
MATMUL_STEPS = 100
COVERED = 0.9  # the least share of a traced run that its op events must span

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\S+(?: \S+)*?) (\w[\w-]*)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) ")


def op_kinds(hlo: str) -> dict[str, tuple[str, str]]:
    """Each instruction of an optimised HLO module: its kind and its shape (`name -> (kind,
    shape)`); a fusion takes the kind of what its computation computes."""
    bodies: dict[str, list[tuple]] = defaultdict(list)  # (name, shape, opcode, called, root)
    signatures, computation = {}, ""
    for line in hlo.splitlines():
        if not line.startswith(" ") and (found := _COMPUTATION.match(line)):
            computation = found.group(1)
            signatures[computation] = line
        elif found := _INSTRUCTION.match(line):
            name, shape, opcode = found.groups()
            called = re.search(r"calls=%([\w.-]+)", line)
            if opcode == "custom-call":  # a library call: cuBLAS's gemm is a matmul
                target = re.search(r'custom_call_target="([^"]*)"', line)
                opcode = "dot" if target and re.search("gemm|matmul", target[1]) else opcode
            root = line.lstrip().startswith("ROOT ")
            bodies[computation].append((name, shape, opcode, called and called.group(1), root))

    def kind(opcode: str, called: str | None) -> str:
        if opcode == "fusion" and called:
            inner = bodies.get(called, [])
            opcodes = {op for _, _, op, _, _ in inner}
            if opcodes & {"dot", "convolution"}:
                return "matmul"
            roots = [kind(op, c) for _, _, op, c, root in inner if root]
            if roots and roots[0] == "copy & transpose":
                return roots[0]
            if opcodes & {"gather", "scatter"}:
                return "gather & scatter"
            return roots[0] if roots else "other"
        if opcode in ("dot", "convolution"):
            return "matmul"
        if opcode in ("copy", "transpose", "concatenate"):
            return "copy & transpose"
        if opcode == "sort":
            return "sort"
        if opcode in ("gather", "scatter"):
            return "gather & scatter"
        if opcode in LOOPS:
            return "loop control"
        return "other"

    def operands(shape: str, called: str | None) -> str:
        """A fusion's operand shapes and its own, without layouts: `f32[64,400] f32[400,256]
        -> f32[64,256]`."""
        if called and (found := re.search(r"\((.*)\) -> (.*) \{", signatures.get(called, ""))):
            shape = " ".join(re.findall(r": (\w+\[[\d,]*\])", found[1])) + f" -> {found[2]}"
        return re.sub(r"\{[\d,]*\}", "", shape)

    return {
        name: (kind(opcode, called), operands(shape, called))
        for instructions in bodies.values()
        for name, shape, opcode, called, _ in instructions
    }


def op_events(trace: dict) -> list[dict]:
    """The trace's events of the program's ops, each with `op`, the HLO instruction it ran: on a
    GPU the kernels (the events of the `/device:GPU` processes, named by their `hlo_op`), on
    the CPU the thunks (the executor's and the thread pool's own events left out)."""
    devices = {
        event["pid"]
        for event in trace["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
        if event.get("args", {}).get("name", "").startswith("/device:GPU")
    }
    events = []
    for event in trace["traceEvents"]:
        if event.get("ph") != "X" or (devices and event["pid"] not in devices):
            continue
        op = event.get("args", {}).get("hlo_op", event["name"])
        if not op.startswith(NOT_OPS):
            events.append(dict(event, op=op))
    return events


def self_times(events: list[dict]) -> Counter:
    """Microseconds of self time per op (`op_events`): each event's duration less the events
    nested in it on the same thread (a GPU stream's kernels never nest)."""
    threads = defaultdict(list)
    for event in events:
        threads[(event["pid"], event["tid"])].append(event)
    total = Counter()
    for events in threads.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for event in events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"]:
                stack.pop()
            if stack:
                total[stack[-1]["op"]] -= event["dur"]
            total[event["op"]] += event["dur"]
            stack.append(event)
    return total


def traced(run, directory: Path) -> tuple[float, Counter, Counter]:
    """One run under `jax.profiler`: its wall seconds (without writing the trace), the self time
    of each op, and how many times each op ran. A trace that stops before the run does (the
    profiler keeps a bounded number of events: about 450,000 ops of a DQN run here) is refused,
    naming `--size`."""
    import jax

    jax.profiler.start_trace(str(directory))
    tic = time.perf_counter()
    run()
    seconds = time.perf_counter() - tic
    jax.profiler.stop_trace()
    (path,) = directory.glob("plugins/profile/*/*.trace.json.gz")
    with gzip.open(path) as f:
        events = op_events(json.load(f))
    check_covered(events, seconds)
    return seconds, self_times(events), Counter(event["op"] for event in events)


def check_covered(events: list[dict], seconds: float) -> None:
    """Refuse a trace whose ops span less than `COVERED` of the run (50 ms of dispatch and
    waiting allowed): the profiler dropped the ops after its last event."""
    span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    if span < COVERED * seconds * 1e6 - 50_000:
        raise SystemExit(
            f"the trace covers {span / 1e6:.2f} s of a {seconds:.2f} s run ({len(events)} ops): "
            "the profiler dropped the rest; run with a smaller --size"
        )


def summarise(times: Counter, counts: Counter, kinds: dict[str, tuple], per: int) -> dict:
    """Per unit of work (`per` of them in the run): milliseconds and ops run by kind, and the
    `TOP` ops with their kind and shape."""
    by_kind, runs = Counter(), Counter()
    for name, us in times.items():
        by_kind[kinds.get(name, ("other", ""))[0]] += us
        runs[kinds.get(name, ("other", ""))[0]] += counts[name]
    top = []
    for name, us in times.most_common(TOP):
        kind, shape = kinds.get(name, ("other", ""))
        top.append(dict(op=name, kind=kind, shape=shape, ms=us / 1e3 / per))
    row = {"kinds": {k: by_kind[k] / 1e3 / per for k in KINDS}, "top": top}
    return row | {"runs": {k: runs[k] / per for k in KINDS}}


def matmul_rates(repeats: int, steps: int = MATMUL_STEPS) -> dict[str, float]:
    """This machine's GFLOPS for the shapes of a PPO iteration's matmuls, each in a scan of
    `steps` dependent matmuls (as in the program: inside a loop, one after another), best of
    `repeats`: the rate the whole iteration would run at if it were nothing but its matmuls."""
    import jax
    import jax.numpy as jnp

    shapes = {"1024x400 @ 400x256": (1024, 400, 256), "1024x256 @ 256x256": (1024, 256, 256)}
    shapes |= {"400x1024 @ 1024x256": (400, 1024, 256), "64x400 @ 400x256": (64, 400, 256)}
    rates = {}
    for label, (m, k, n) in shapes.items():
        a, b = jnp.full((m, k), 0.01), jnp.full((k, n), 0.01)

        def step(c, _, a=a, b=b):  # each matmul reads the last one's result: none is hoisted
            return c + ((a + c) @ b)[0, 0] * 1e-9, None

        compiled = jax.jit(lambda: jax.lax.scan(step, 0.0, None, steps)[0]).lower().compile()
        jax.block_until_ready(compiled())
        best = float("inf")
        for _ in range(repeats):
            tic = time.perf_counter()
            jax.block_until_ready(compiled())
            best = min(best, time.perf_counter() - tic)
        rates[label] = 2 * m * k * n * steps / best / 1e9
    return rates


def iteration_gflop(config, obs_size: int, num_actions: int) -> float:
    """The matmul work of one training iteration of canter's PPO `config` (actor and critic, two
    hidden layers each): the actor on every rollout step, the critic on every stored observation
    after the rollout, and per sample and epoch both networks forward, their weight gradients
    and their hidden gradients (none for the observations). Evaluation is left out."""
    h = config.hidden_size
    actor = obs_size * h + h * h + h * num_actions
    critic = obs_size * h + h * h + h
    update = 3 * (actor + critic) - 2 * obs_size * h  # no gradient for the observations
    macs = config.num_envs * config.num_steps * (actor + critic + config.update_epochs * update)
    return 2 * macs / 1e9


def programs(work: str, size: int) -> tuple[dict, float | None]:
    """The two sides' `train` of `work` at `size` (iterations or env steps), and for PPO the
    iteration's matmul GFLOP."""
    import gymnax
    import numpy as np
    from canter.algorithms import dqn, ppo

    from benchmarks.speed import rejax_peer

    if work == "dqn-minatar":  # speed_dqn.py's configs, updating after a tenth of the run
        learns = dataclasses.replace(speed_dqn.minatar_config(size), learning_starts=size // 10)
        acts = speed_dqn.minatar_config(size, acting_only=True)  # the warm-up never ends
        return {"canter": dqn.make_train(learns), "canter, no updates": dqn.make_train(acts)}, None
    setup = dict(speed_minatar.PPO_SETUP, iterations=size)
    config = speed_ppo.canter_config(setup, 1)
    env, env_params = gymnax.make(setup["env"])
    obs_size = int(np.prod(env.observation_space(env_params).shape))
    gflop = iteration_gflop(config, obs_size, int(env.action_space(env_params).n))
    return {"canter": ppo.make_train(config), "rejax": rejax_peer.ppo(setup, size)[0]}, gflop


def profile(work: str, size: int, repeats: int, seeds: int = 1) -> tuple[dict, float | None]:
    """Per side, a row per round (`summarise`'s, in ms per unit of work of all `seeds` vmapped
    seeds together, with the wall time of the traced run, and the wall and process CPU time of
    an untraced one), and PPO's GFLOP per iteration (all seeds)."""
    import jax

    trains, gflop = programs(work, size)
    keys = jax.random.split(jax.random.key(0), seeds)
    runs, kinds = {}, {}
    for side, train in trains.items():
        compiled = jax.jit(jax.vmap(train)).lower(keys).compile()
        kinds[side] = op_kinds(compiled.as_text())
        runs[side] = lambda compiled=compiled: jax.block_until_ready(compiled(keys))
        runs[side]()  # the first call apart
    rounds = {side: [] for side in trains}
    for _ in range(repeats):
        for side, run in runs.items():
            tic, cpu = time.perf_counter(), time.process_time()
            run()
            plain, cpu = time.perf_counter() - tic, time.process_time() - cpu
            with tempfile.TemporaryDirectory() as directory:
                wall, times, counts = traced(run, Path(directory))
            row = summarise(times, counts, kinds[side], size)
            row.update(wall_ms=1e3 * wall / size, plain_ms=1e3 * plain / size)
            row["cpu_ms"] = 1e3 * cpu / size
            rounds[side].append(row)
    return rounds, gflop and gflop * seeds


def median_row(rounds: list[dict]) -> dict:
    """Per kind, the median over rounds; the top ops of the median round by total op time."""
    row = {key: statistics.median(r[key] for r in rounds) for key in ("wall_ms", "plain_ms")}
    row["cpu_ms"] = statistics.median(r["cpu_ms"] for r in rounds)
    for key in ("kinds", "runs"):
        row[key] = {k: statistics.median(r[key][k] for r in rounds) for k in KINDS}
    order = sorted(rounds, key=lambda r: sum(r["kinds"].values()))
    return row | {"top": order[len(order) // 2]["top"]}


def table(record: dict) -> str:
    """The per-kind table (ms per iteration for PPO, us per env step for DQN), PPO's matmul
    rates, and each side's largest ops."""
    sides, unit = WORKS[record["work"]]
    first, second = sides
    rows = {side: median_row(record["rounds"][side]) for side in sides}
    scale, label = (1, "ms") if unit == "iteration" else (1000, "us")
    size, repeats, seeds = record["size"], record["repeats"], record.get("seeds", 1)
    lines = [
        f"{label} per {unit} ({size} {unit}s, "
        f"{'1 seed' if seeds == 1 else f'{seeds} seeds vmapped'}, median of {repeats} rounds)",
        "",
        f"| kind | {first} | {second} | {first} / {second} |",
        "|---|---:|---:|---:|",
    ]

    def line(name: str, a: float, b: float, digits: int = 1) -> str:
        ratio = f"{a / b:.2f}" if b else ""
        return f"| {name} | {a:.{digits}f} | {b:.{digits}f} | {ratio} |"

    def measure(name: str, pick) -> str:
        return line(name, *(scale * pick(rows[side]) for side in sides))

    for k in KINDS:
        lines.append(measure(k, lambda row, k=k: row["kinds"][k]))
    lines.append(measure("all ops", lambda row: sum(row["kinds"].values())))
    lines.append(measure("wall time, traced", lambda row: row["wall_ms"]))
    lines.append(measure("wall time, untraced", lambda row: row["plain_ms"]))
    lines.append(measure("process CPU time, untraced", lambda row: row["cpu_ms"]))
    ops = [sum(rows[side]["runs"].values()) for side in sides]
    lines.append(line(f"ops run per {unit}", *ops, digits=0))
    if record.get("iteration_gflop"):
        lines += matmul_lines(record, rows)
    for side in sides:
        lines += ["", f"{side}: the {TOP} largest ops", "", f"| op | kind | shape | {label} |"]
        lines.append("|---|---|---|---:|")
        for op in rows[side]["top"]:
            cells = f"{op['op']} | {op['kind']} | `{op['shape']}` | {scale * op['ms']:.1f}"
            lines.append(f"| {cells} |")
    lines += ["", f"Machine: {record['machine']}."]
    return "\n".join(lines) + "\n"


def matmul_lines(record: dict, rows: dict) -> list[str]:
    """PPO's iteration GFLOP, the rate each whole run does it at, and the bare shapes' rates."""
    gflop, repeats = record["iteration_gflop"], record["repeats"]
    seeds = record.get("seeds", 1)
    who = f"{seeds} seeds, the same on both sides" if seeds != 1 else "the same on both sides"
    lines = ["", f"An iteration's matmuls: {gflop:.1f} GFLOP ({who}).", ""]
    lines += ["| matmul rate | GFLOPS |", "|---|---:|"]
    whole = "whole run per iteration (untraced; init and the final evaluation in it)"
    for side, row in rows.items():
        lines.append(f"| {side}'s {whole} | {gflop / row['plain_ms'] * 1e3:.0f} |")
    for shape, rate in record["matmul_gflops"].items():
        cell = f"`{shape}` alone, {MATMUL_STEPS} in a scan (best of {repeats})"
        lines.append(f"| {cell} | {rate:.0f} |")
    return lines


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--work", choices=sorted(WORKS), default="ppo-minatar")
    parser.add_argument(
        "--size", type=int, help="PPO iterations or DQN env steps per run (default: 4 / 1000)"
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds vmapped in one program")
    args = parser.parse_args()
    size = args.size or SIZES[args.work]
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    rounds, gflop = profile(args.work, size, args.repeats, args.seeds)
    record = dict(machine=harness.machine(), work=args.work, size=size, repeats=args.repeats)
    record["seeds"] = args.seeds
    record["rounds"] = rounds
    if gflop:
        record.update(iteration_gflop=gflop, matmul_gflops=matmul_rates(args.repeats))
    text = table(record)
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"profile_{args.work}" + (f"-{args.seeds}-seeds" if args.seeds != 1 else "")
    harness.write(args.out / f"{name}.json", json.dumps(record, indent=1))
    harness.write(args.out / f"{name}.md", text)
    print(text)


if __name__ == "__main__":
    main()
