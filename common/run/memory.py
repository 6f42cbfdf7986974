"""How much memory a run needs, estimated before anything compiles: `run` refuses a batch that
does not fit, and `--dry-run` prints the estimate.

Everything a run holds scales with its batch (seeds x sweep points): under `vmap` every value
of the program gains the batch axis, so one seed's program, times the batch, is the whole. The
estimate walks the traced program of one seed's interval (`jax.make_jaxpr` of
`Train.interval`: tracing, not compiling) as XLA's buffer assignment would, roughly: every
value is a buffer from the equation that makes it to its last use; an output may take over a
same-shaped input that dies there (elementwise ops, in-place updates, a loop's carry); a loop
or branch adds the most its body holds at once. The peak counts the train state going in and
out, the rollout and its stacked transitions, the update's minibatches, gradients and
optimiser temporaries, the evaluation's episodes. Two more copies of the train state are added,
those a checkpoint holds while the next interval computes (the overlap's copy on the device,
and the state gathered to the host: on a CPU both are in the machine's memory, so there both
count; on an accelerator the one on the device).

Why not XLA's own figure: `compiled.memory_analysis()` is exact, and jax 0.10.2 gives it on
the CPU, but only after the compile, even of one seed: 4-17 s for the house files' defaults
and 42 s for Craftax-Classic on 2 busy cores, where the trace takes 0.2-1.3 s and about 3 s
(a dry run of ppo's Breakout-MinAtar preset went from 4.7 to 5.5 s, Craftax-Classic's from
5.2 to 8.2 s). The batch shapes of each algorithm (num_envs x num_steps
transitions, a replay buffer) would miss what the program makes of them (a CNN's activations,
an update's gradients, evaluation); the walk reads them from the program, a fork's too.

How near it is, one seed of each house file's defaults, the walk against XLA's arguments +
temporaries + outputs not aliased, in MiB (2-core CPU, jax 0.10.2): ppo CartPole 0.43 / 0.39,
Breakout-MinAtar 29.7 / 32.9, Craftax-Classic 82.9 / 90.2; dqn 0.67 / 0.90; sac 3.55 / 4.05;
td3 3.53 / 3.93; pqn 1.99 / 2.01; ppo_rnn 1.01 / 1.04; ppo_rnd 2.34 / 2.84; ppo_trxl 11.0 /
9.9; pqn_rnn 11.8 / 13.6. Under vmap XLA's figure scales with the seeds (ppo CartPole, 64
seeds: 0.40 a seed). The exception is ppo_continuous, 2.33 / 6.28: XLA joins the critic's two
[4096, 64] layers (observations, final observations) into one of [8192, 64], which no trace
shows. So the estimate is about the need, not a bound: a run near the limit can still run out.
"""

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from canter.common.config import ConfigError
from canter.common.run.batch import Batch
from canter.common.run.devices import memory_bytes
from jax.extend.core import Jaxpr, Literal, Var, jaxprs_in_params

MIB = 2**20
GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Bytes one batch entry (a seed of one sweep point) needs: `program` at the peak of one
    interval's program (its state in and out included), `state` one copy of its train state,
    `copies` more of which a checkpoint holds meanwhile."""

    program: int
    state: int
    copies: int

    @property
    def per_seed(self) -> int:
        return self.program + self.copies * self.state


def estimate(train: Any) -> Estimate:
    """The memory one seed of `train` needs (traced, not compiled)."""
    state, key = jax.eval_shape(train.start, jax.random.key(0))
    index = jax.ShapeDtypeStruct((), jnp.int32)
    traced = jax.make_jaxpr(train.interval)(state, key, index)
    copies = 2 if jax.local_devices()[0].platform == "cpu" else 1
    return Estimate(_peak(traced.jaxpr, {}), _tree_bytes(state), copies)


# (make_train, Config) -> Estimate: a process that runs a config again (tests, a notebook)
# traces it once; `make_train(config)` is the same program each time (docs/design.md).
_estimates: dict[tuple, Estimate] = {}


def check(train: Any, batch: Batch, make_train: Any = None) -> str:
    """Refuse (ConfigError) a batch whose estimate exceeds the devices' memory; else the line
    the dry run prints: per seed and in all, against what the devices have. `train` is
    `make_train` of the batch's first point (given, the estimate is kept for that pair)."""
    key, need = None, None
    if make_train is not None:
        try:  # every seed's program is the same
            key = (make_train, dataclasses.replace(batch.point_configs[0], seed=0, num_seeds=1))
            need = _estimates.get(key)
        except TypeError:  # a Config without those fields, or an unhashable one: traced each time
            key = None
    if need is None:
        need = estimate(train)
        if key is not None:
            _estimates[key] = need
    total = need.per_seed * batch.size
    memory, where = memory_bytes()
    seeds = f"{batch.size:,} seed" + ("s" if batch.size != 1 else "")
    points = len(batch.points)
    if batch.sweep:
        seeds = f"{len(batch.seeds):,} seeds x {points} sweep points"
    what = (
        f"{_size(need.per_seed)} a seed: one interval's program {_size(need.program)} at its "
        f"peak, and {need.copies} more copies of its {_size(need.state)} train state for "
        "checkpoints (traced, not compiled: docs/running.md)"
    )
    if not memory or total <= memory:
        share = (
            f"{100 * total / memory:.1f}%" if memory and total >= memory / 1000 else "under 0.1%"
        )
        has = f"{share} of {where}, {_size(memory)}" if memory else f"{where} memory"
        return f"memory: about {_size(total)} for {seeds} ({has}); {what}"
    fits = memory // max(need.per_seed, 1)
    if not batch.sweep:
        instead = f"At most {fits:,} seeds fit in one program: --num-seeds {fits} or fewer"
    elif fits >= points:
        instead = (
            f"At most {fits:,} seeds x sweep points fit in one program: with {points} points, "
            f"--num-seeds {fits // points} or fewer"
        )
    else:
        instead = f"At most {fits:,} seeds x sweep points fit in one program: sweep fewer points"
    if not fits:
        instead = "Not one seed fits: use a machine with more memory, or smaller sizes"
    raise ConfigError(
        f"{seeds} need about {_size(total)}, more than {where} has ({_size(memory)}): {what}. "
        f"{instead}, with --seed to start the next run where this one ends."
    )


def _size(n: int) -> str:
    return f"{n / GIB:,.1f} GiB" if n >= GIB else f"{n / MIB:,.2f} MiB"


def _bytes(v: Any) -> int:
    """Bytes of a traced value (a token or a literal scalar: none)."""
    aval = v.aval
    if isinstance(v, Literal) or not hasattr(aval, "shape"):
        return 0
    return math.prod(aval.shape) * aval.dtype.itemsize  # a typed PRNG key: its key data


def _tree_bytes(tree: Any) -> int:
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def _peak(jaxpr: Jaxpr, memo: dict[int, int]) -> int:
    """The most bytes live at once while `jaxpr` runs, its inputs included: each value from the
    equation that makes it to its last use; an output takes over an input of the same shape
    and type that dies at its equation; an equation with a body (loop, branch, call) adds the
    most that body holds beyond its own inputs. `memo` holds bodies already walked."""
    if id(jaxpr) in memo:
        return memo[id(jaxpr)]
    last: dict[Var, int] = {}
    for k, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if isinstance(v, Var):
                last[v] = k
    end = len(jaxpr.eqns)
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            last[v] = end
    live = sum(_bytes(v) for v in {*jaxpr.invars, *jaxpr.constvars})
    peak = live
    for k, eqn in enumerate(jaxpr.eqns):
        inner = max(
            (
                _peak(body, memo) - sum(map(_bytes, body.invars))
                for body in jaxprs_in_params(eqn.params)
            ),
            default=0,
        )
        dying = {v for v in eqn.invars if isinstance(v, Var) and last.get(v) == k}
        free = sorted((_bytes(v), str(v.aval)) for v in dying)
        made = 0
        for out in eqn.outvars:
            size, kind = _bytes(out), str(out.aval)
            if (size, kind) in free:
                free.remove((size, kind))  # takes over a dying input's buffer
            else:
                made += size
        peak = max(peak, live + made + max(inner, 0))
        live += made - sum(size for size, _ in free)
        live -= sum(_bytes(v) for v in eqn.outvars if isinstance(v, Var) and v not in last)
    memo[id(jaxpr)] = peak
    return peak
