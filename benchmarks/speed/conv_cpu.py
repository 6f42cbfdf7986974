"""Convolutions inside a loop on XLA:CPU: `eqx.nn.Conv2d` against canter's `Conv2d`.

Times one SGD step (gradient and update) of two torsos inside a `lax.scan`, where every canter
training step runs, with Equinox's stock convolution and with canter's patch-matmul one (same
parameters, same numbers), taking turns, `--repeats` rounds. canter's layer is timed three ways,
to measure each of its choices in the same run: without its space-to-depth fold (kh x kw
strided slices, what canter ran before 2026-12-02; MinAtar's stride 1 has nothing to fold),
folded with Equinox's channels-first layout between layers (two transposes a layer: pqn, dqn and
ppo --network cnn), and folded with channels last throughout (`Conv2d.channels_last`:
ppo_atari's torso). Also the stock one outside a loop
(one jitted gradient), which XLA:CPU runs with its library kernel; and, where torch is installed
(the bench extra), the same torso and step in PyTorch (`torch.nn.Conv2d`, channels first, its
default threads), as CleanRL's ppo_atari.py trains it on a CPU:

- Nature CNN (ppo_atari.py): 32 8x8/4, 64 4x4/2, 64 3x3/1 and 512 dense units, on 84x84x4
  frames, 256 per minibatch (CleanRL's Atari PPO);
- MinAtar (pqn.py, ppo.py --network cnn): 16 3x3 filters and 128 dense units on 10x10x4 grids,
  512 per minibatch.

    python benchmarks/speed/conv_cpu.py            # writes benchmarks/results/conv_cpu.md
"""

import argparse
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.blocks.layers import Conv2d

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

TORSOS = {  # name: (frame shape HxWxC, minibatch, ((out, kernel, stride), ...), dense units)
    "Nature CNN, 84x84x4": ((84, 84, 4), 256, ((32, 8, 4), (64, 4, 2), (64, 3, 1)), 512),
    "MinAtar CNN, 10x10x4": ((10, 10, 4), 512, ((16, 3, 1),), 128),
}
STEPS = 4  # scan length


class StridedPatches(Conv2d):
    """canter's patch matmul before the fold: one strided slice per kernel offset."""

    def __call__(self, x, *, key=None):
        out_channels, _, kh, kw = self.weight.shape
        (sh, sw), pads = self.stride, self.padding
        x = jnp.pad(jnp.transpose(x, (1, 2, 0)), (*pads, (0, 0)))
        oh, ow = (x.shape[0] - kh) // sh + 1, (x.shape[1] - kw) // sw + 1
        slices = [
            x[i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
            for i in range(kh)
            for j in range(kw)
        ]
        weight = jnp.transpose(self.weight, (2, 3, 1, 0)).reshape(-1, out_channels)
        return jnp.transpose(jnp.concatenate(slices, axis=-1) @ weight, (2, 0, 1)) + self.bias


class Torso(eqx.Module):
    convs: tuple
    dense: eqx.nn.Linear
    last: bool = eqx.field(static=True)

    def __init__(self, conv_cls, frame, layers, units, key, last=False):
        self.last = last
        keys = jax.random.split(key, len(layers) + 1)
        convs, channels, size = [], frame[-1], frame[0]
        for (out, kernel, stride), k in zip(layers, keys[:-1], strict=True):
            convs.append(conv_cls(channels, out, kernel, stride=stride, key=k))
            channels, size = out, (size - kernel) // stride + 1
        self.convs = tuple(convs)
        self.dense = eqx.nn.Linear(channels * size * size, units, key=keys[-1])
        if last:  # the dense layer reads (height, width, channels): the same weights, reordered
            weight = self.dense.weight.reshape(units, channels, size, size)
            weight = jnp.transpose(weight, (0, 2, 3, 1)).reshape(units, -1)
            self.dense = eqx.tree_at(lambda d: d.weight, self.dense, weight)

    def __call__(self, x):
        if self.last:  # frames are (height, width, channels)
            for conv in self.convs:
                x = jax.nn.relu(conv.channels_last(x))
            return jax.nn.relu(self.dense(x.reshape(-1)))
        x = jnp.transpose(x, (2, 0, 1))
        for conv in self.convs:
            x = jax.nn.relu(conv(x))
        return jax.nn.relu(self.dense(x.reshape(-1)))


def loss(model, frames):
    return jnp.mean(jax.vmap(model)(frames) ** 2)


def sgd(model, frames):
    grads = jax.grad(loss)(model, frames)
    return jax.tree.map(lambda p, g: p - 1e-4 * g, model, grads)


def seconds_per_step(fn, model, frames) -> float:
    jax.block_until_ready(fn(model, frames))  # compile and warm up
    tic = time.perf_counter()
    jax.block_until_ready(fn(model, frames))
    return (time.perf_counter() - tic) / STEPS


def torch_seconds_per_step(frame, batch, layers, units) -> float:
    """One SGD step of the same torso and loss in PyTorch (NaN without torch)."""
    try:
        import torch
    except ImportError:
        return float("nan")
    modules, channels, size = [], frame[-1], frame[0]
    for out, kernel, stride in layers:
        modules += [torch.nn.Conv2d(channels, out, kernel, stride=stride), torch.nn.ReLU()]
        channels, size = out, (size - kernel) // stride + 1
    dense = torch.nn.Linear(channels * size * size, units)
    net = torch.nn.Sequential(*modules, torch.nn.Flatten(), dense, torch.nn.ReLU())
    frames = torch.rand(STEPS, batch, frame[-1], frame[0], frame[1]) * 255
    optimiser = torch.optim.SGD(net.parameters(), lr=1e-4)

    def run() -> None:
        for minibatch in frames:
            optimiser.zero_grad()
            (net(minibatch) ** 2).mean().backward()
            optimiser.step()

    run()  # warm up
    tic = time.perf_counter()
    run()
    return (time.perf_counter() - tic) / STEPS


def ratio(rounds: list, i: int, j: int) -> str:
    """Column i over column j: the median and each round's."""
    per_round = [r[i] / r[j] for r in rounds]
    each = ", ".join(f"{v:.1f}" for v in per_round)
    return f"{np.median(per_round):.1f} ({each})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    in_scan = jax.jit(lambda m, x: jax.lax.scan(lambda m, f: (sgd(m, f), None), m, x)[0])
    unrolled = jax.jit(lambda m, x: [sgd(m, f) for f in x])
    lines = [
        "| torso | stock conv in a scan (ms) | strided patches (ms) | folded patches (ms) | "
        "folded, channels last (ms) | stock / channels last | strided / folded | folded / "
        "channels last | stock conv, no loop (ms) | torch (ms) | channels last / torch |",
        "|---|---:|---:|---:|---:|---|---|---|---:|---:|---|",
    ]
    key = jax.random.key(0)
    for name, (frame, batch, layers, units) in TORSOS.items():
        frames = jax.random.uniform(key, (STEPS, batch, *frame)) * 255
        stock = Torso(eqx.nn.Conv2d, frame, layers, units, key)
        strided = Torso(StridedPatches, frame, layers, units, key)
        folded = Torso(Conv2d, frame, layers, units, key)
        last = Torso(Conv2d, frame, layers, units, key, last=True)
        want = jax.vmap(stock)(frames[0, :4])
        for torso in (strided, folded, last):  # the same numbers, or the timings mean nothing
            np.testing.assert_allclose(jax.vmap(torso)(frames[0, :4]), want, rtol=1e-4, atol=1e-3)
        rounds = []
        for _ in range(args.repeats):
            rounds.append(
                (
                    seconds_per_step(in_scan, stock, frames),
                    seconds_per_step(in_scan, strided, frames),
                    seconds_per_step(in_scan, folded, frames),
                    seconds_per_step(in_scan, last, frames),
                    seconds_per_step(unrolled, stock, frames),
                    torch_seconds_per_step(frame, batch, layers, units),
                )
            )
        ms = [f"{np.median([r[i] for r in rounds]) * 1e3:.0f}" for i in range(6)]
        cells = [
            *ms[:4],
            ratio(rounds, 0, 3),
            ratio(rounds, 1, 2),
            ratio(rounds, 2, 3),
            *ms[4:],
            ratio(rounds, 3, 5),
        ]
        lines.append(f"| {name}, {batch} per step | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    harness.write(harness.RESULTS / "conv_cpu.md", f"{table}\n\nMachine: {harness.machine()}.\n")
    print(table)


if __name__ == "__main__":
    main()
