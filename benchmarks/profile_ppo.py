"""Where the time of a PPO iteration goes, op by op: canter's program and rejax's, one process.

Both sides run speed_minatar.py's setup (gymnax-blines' MinAtar PPO on Breakout-MinAtar, one
seed, `jit(vmap(train))`, 8 evaluation episodes at the end). Each program is compiled, run
once, and then run `--repeats` times under `jax.profiler`, the two taking turns. On XLA:CPU the
trace holds one event per executed thunk (an op or a fusion of the optimised program, or a
loop's own control), on a GPU one per kernel, named by the op that launched it; this script
sums each op's self time (its duration less the ops it waits on, per thread or stream) and
sorts the ops into kinds by what the optimised program says they compute:

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

Beside the table: the iteration's matmul work in GFLOP (counted from the config), the rate the
whole run does it at, and this machine's rate for the same shapes alone.

    python benchmarks/profile_ppo.py --iterations 4 --repeats 5

Writes benchmarks/results/profile_ppo-minatar.md and .json (per kind and per top op, in ms per
iteration, the median over the rounds).
"""

import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` from any directory

from benchmarks import harness, speed_minatar, speed_ppo  # noqa: E402

IMPLS = ("canter", "rejax")
KINDS = ("matmul", "copy & transpose", "sort", "gather & scatter", "loop control", "other")
# Trace events that are the executor's or the thread pool's, not an op of the program.
NOT_OPS = ("$", "ThunkExecutor", "SlinkyThreadPool", "ThreadpoolListener", "end: ")
LOOPS = ("while", "conditional", "call")
TOP = 8  # ops named in the table, per side
MATMUL_STEPS = 100

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


def self_times(trace: dict) -> Counter:
    """Microseconds of self time per op: each event's duration less the events nested in it on
    the same thread (a GPU stream's kernels never nest)."""
    threads = defaultdict(list)
    for event in op_events(trace):
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


def traced(run, directory: Path) -> tuple[float, Counter]:
    """One run under `jax.profiler`: its wall seconds (without writing the trace) and the self
    time of each op."""
    import jax

    jax.profiler.start_trace(str(directory))
    tic = time.perf_counter()
    run()
    seconds = time.perf_counter() - tic
    jax.profiler.stop_trace()
    (path,) = directory.glob("plugins/profile/*/*.trace.json.gz")
    with gzip.open(path) as f:
        trace = json.load(f)
    return seconds, self_times(trace)


def summarise(times: Counter, kinds: dict[str, tuple[str, str]], per: int) -> dict:
    """Milliseconds per iteration by kind, and the `TOP` ops with their kind and shape."""
    by_kind = Counter()
    for name, us in times.items():
        by_kind[kinds.get(name, ("other", ""))[0]] += us
    top = []
    for name, us in times.most_common(TOP):
        kind, shape = kinds.get(name, ("other", ""))
        top.append(dict(op=name, kind=kind, shape=shape, ms=us / 1e3 / per))
    return {"kinds": {k: by_kind[k] / 1e3 / per for k in KINDS}, "top": top}


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


def profile(iterations: int, repeats: int) -> tuple[dict, float]:
    import gymnax
    import jax
    import numpy as np
    from canter.algorithms import ppo

    from benchmarks import rejax_peer

    setup = dict(speed_minatar.PPO_SETUP, iterations=iterations)
    config = speed_ppo.canter_config(setup, 1)
    env, env_params = gymnax.make(setup["env"])
    obs_size = int(np.prod(env.observation_space(env_params).shape))
    gflop = iteration_gflop(config, obs_size, int(env.action_space(env_params).n))
    keys = jax.random.split(jax.random.key(0), 1)
    trains = {
        "canter": lambda: ppo.make_train(config),
        "rejax": lambda: rejax_peer.ppo(setup, iterations)[0],
    }
    programs, kinds = {}, {}
    for impl in IMPLS:
        compiled = jax.jit(jax.vmap(trains[impl]())).lower(keys).compile()
        kinds[impl] = op_kinds(compiled.as_text())
        programs[impl] = lambda compiled=compiled: jax.block_until_ready(compiled(keys))
        programs[impl]()  # the first call apart
    rounds = {impl: [] for impl in IMPLS}
    for _ in range(repeats):
        for impl in IMPLS:
            tic, cpu = time.perf_counter(), time.process_time()
            programs[impl]()
            plain, cpu = time.perf_counter() - tic, time.process_time() - cpu
            with tempfile.TemporaryDirectory() as directory:
                wall, times = traced(programs[impl], Path(directory))
            row = summarise(times, kinds[impl], iterations)
            row.update(wall_ms=1e3 * wall / iterations, plain_ms=1e3 * plain / iterations)
            row["cpu_ms"] = 1e3 * cpu / iterations
            rounds[impl].append(row)
    return rounds, gflop


def median_row(rounds: list[dict]) -> dict:
    """Per kind, the median over rounds; the top ops of the median round by total op time."""
    kinds = {k: statistics.median(r["kinds"][k] for r in rounds) for k in KINDS}
    order = sorted(rounds, key=lambda r: sum(r["kinds"].values()))
    return {
        "kinds": kinds,
        "wall_ms": statistics.median(r["wall_ms"] for r in rounds),
        "plain_ms": statistics.median(r["plain_ms"] for r in rounds),
        "cpu_ms": statistics.median(r["cpu_ms"] for r in rounds),
        "top": order[len(order) // 2]["top"],
    }


def table(record: dict) -> str:
    """The per-kind table, the matmul rates, and each side's largest ops."""
    rows = {impl: median_row(record["rounds"][impl]) for impl in IMPLS}
    canter, rejax = rows["canter"], rows["rejax"]
    iterations, repeats = record["iterations"], record["repeats"]
    lines = [
        f"ms per iteration ({iterations} iterations, 1 seed, median of {repeats} rounds)",
        "",
        "| kind | canter | rejax | canter / rejax |",
        "|---|---:|---:|---:|",
    ]

    def line(label: str, a: float, b: float) -> str:
        ratio = f"{a / b:.2f}" if b else ""
        return f"| {label} | {a:.1f} | {b:.1f} | {ratio} |"

    for k in KINDS:
        lines.append(line(k, canter["kinds"][k], rejax["kinds"][k]))
    total = {impl: sum(rows[impl]["kinds"].values()) for impl in IMPLS}
    lines.append(line("all ops", total["canter"], total["rejax"]))
    lines.append(line("wall time, traced", canter["wall_ms"], rejax["wall_ms"]))
    lines.append(line("wall time, untraced", canter["plain_ms"], rejax["plain_ms"]))
    lines.append(line("process CPU time, untraced", canter["cpu_ms"], rejax["cpu_ms"]))
    gflop = record["iteration_gflop"]
    lines += ["", f"An iteration's matmuls: {gflop:.1f} GFLOP (the same on both sides).", ""]
    lines += ["| matmul rate | GFLOPS |", "|---|---:|"]
    whole = "whole run per iteration (untraced; init and the final evaluation in it)"
    lines += [
        f"| {impl}'s {whole} | {gflop / rows[impl]['plain_ms'] * 1e3:.0f} |" for impl in IMPLS
    ]
    for shape, rate in record["matmul_gflops"].items():
        lines.append(
            f"| `{shape}` alone, {MATMUL_STEPS} in a scan (best of {repeats}) | {rate:.0f} |"
        )
    for impl in IMPLS:
        lines += ["", f"{impl}'s {TOP} largest ops:", "", "| op | kind | shape | ms |"]
        lines.append("|---|---|---|---:|")
        for op in rows[impl]["top"]:
            lines.append(f"| {op['op']} | {op['kind']} | `{op['shape']}` | {op['ms']:.1f} |")
    lines += ["", f"Machine: {harness.machine()}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--iterations", type=int, default=4, help="PPO iterations per run")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    rounds, gflop = profile(args.iterations, args.repeats)
    rates = matmul_rates(args.repeats)
    record = dict(machine=harness.machine(), iterations=args.iterations, repeats=args.repeats)
    record.update(rounds=rounds, iteration_gflop=gflop, matmul_gflops=rates)
    text = table(record)
    args.out.mkdir(parents=True, exist_ok=True)
    harness.write(args.out / "profile_ppo-minatar.json", json.dumps(record, indent=1))
    harness.write(args.out / "profile_ppo-minatar.md", text)
    print(text)


if __name__ == "__main__":
    main()
