"""The replay buffer: ring order, fill level, uniform sampling of filled rows, vmapping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.blocks.buffer import ReplayBuffer


def example():
    return {"obs": jnp.zeros(2), "action": jnp.zeros((), jnp.int32), "done": jnp.array(False)}


def batch(start: int, count: int):
    values = jnp.arange(start, start + count)
    return {
        "obs": jnp.stack([values, -values], axis=1).astype(jnp.float32),
        "action": values.astype(jnp.int32),
        "done": values % 2 == 0,
    }


def test_create_is_empty_with_the_example_layout():
    buffer = ReplayBuffer.create(example(), 5)
    assert buffer.buffer_size == 5 and int(buffer.size) == 0 and int(buffer.position) == 0
    assert buffer.data["obs"].shape == (5, 2) and buffer.data["obs"].dtype == jnp.float32
    assert buffer.data["action"].dtype == jnp.int32 and buffer.data["done"].dtype == jnp.bool_


def test_ring_overwrites_the_oldest_rows():
    buffer = ReplayBuffer.create(example(), 5)
    buffer = buffer.add(batch(0, 3))
    assert int(buffer.size) == 3 and int(buffer.position) == 3
    assert buffer.data["action"].tolist() == [0, 1, 2, 0, 0]
    buffer = buffer.add(batch(3, 3))  # wraps: row 0 now holds 5
    assert int(buffer.size) == 5 and int(buffer.position) == 1
    assert buffer.data["action"].tolist() == [5, 1, 2, 3, 4]
    assert buffer.data["obs"][0].tolist() == [5.0, -5.0]
    assert buffer.data["done"].tolist() == [False, False, True, False, True]
    buffer = buffer.add(batch(6, 4))
    assert buffer.data["action"].tolist() == [5, 6, 7, 8, 9] and int(buffer.position) == 0


def test_adding_more_than_the_capacity_fails():
    with pytest.raises(ValueError, match="buffer of 5"):
        ReplayBuffer.create(example(), 5).add(batch(0, 6))


def test_sampling_draws_only_filled_rows_uniformly():
    buffer = ReplayBuffer.create(example(), 100).add(batch(0, 4))
    sample = buffer.sample(jax.random.key(0), 4000)
    actions = np.asarray(sample["action"])
    assert set(actions.tolist()) == {0, 1, 2, 3}  # never the 96 empty rows
    counts = np.bincount(actions, minlength=4)
    assert np.all(np.abs(counts - 1000) < 150), counts
    # Rows stay whole: each sampled observation belongs to its sampled action.
    np.testing.assert_array_equal(sample["obs"][:, 0], actions)
    np.testing.assert_array_equal(sample["obs"][:, 1], -actions)


def test_buffer_is_vmappable_and_jittable():
    def fill(key, start):
        buffer = ReplayBuffer.create(example(), 8)
        buffer = buffer.add(batch(0, 3))
        buffer = buffer.add(jax.tree.map(lambda x: x + start.astype(x.dtype), batch(3, 3)))
        return buffer, buffer.sample(key, 16)

    keys = jax.random.split(jax.random.key(1), 2)
    buffers, samples = jax.jit(jax.vmap(fill))(keys, jnp.array([0, 100]))
    assert buffers.data["action"].shape == (2, 8)
    assert buffers.size.tolist() == [6, 6] and buffers.position.tolist() == [6, 6]
    assert buffers.data["action"][1, :6].tolist() == [0, 1, 2, 103, 104, 105]
    for leaf in jax.tree.leaves(buffers):
        assert isinstance(leaf, jax.Array)
    # Independent keys per seed give independent draws.
    assert not np.array_equal(samples["action"][0] % 100, samples["action"][1] % 100)
