"""The blocks that keep programs portable: the orthogonal initialiser without LAPACK (whose
XLA:CPU custom calls deadlock, common/blocks/initializers.py), loops and clipping lowered per
platform."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.blocks.initializers import orthogonal

# Every house file's whole program is checked for LAPACK calls in tests/test_house.py, from the
# trace that its structural checks read.


@pytest.mark.parametrize("shape", [(64, 4), (4, 64), (64, 64), (1, 8), (256, 17)])
def test_orthogonal_matches_numpy_qr_with_positive_diagonal(shape):
    key = jax.random.key(7)
    ours = np.asarray(orthogonal(key, shape, 2.0))
    rows, cols = shape
    a = np.asarray(jax.random.normal(key, (max(shape), min(shape))), dtype=np.float64)
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    expected = 2.0 * (q if rows >= cols else q.T)
    np.testing.assert_allclose(ours, expected, atol=2e-6)
    gram = ours @ ours.T if rows < cols else ours.T @ ours
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(shape)), atol=1e-4)


def test_orthogonal_is_batched_under_vmap():
    keys = jax.random.split(jax.random.key(1), 3)
    batch = jax.jit(jax.vmap(lambda k: orthogonal(k, (16, 8))))(keys)
    for key, matrix in zip(keys, batch, strict=True):
        np.testing.assert_allclose(matrix, orthogonal(key, (16, 8)), atol=1e-6)
    assert not np.allclose(batch[0], batch[1])


def test_with_jit_off_orthogonal_takes_numpys_qr_and_gives_the_jitted_values(monkeypatch):
    """`--debug` runs op by op: the Gram-Schmidt loop would be thousands of dispatches per layer,
    so the host's QR of the same draw stands in for it, equal to float tolerance."""
    from canter.common.blocks import initializers

    calls = []
    host = initializers.host_orthogonal
    monkeypatch.setattr(initializers, "host_orthogonal", lambda *a: calls.append(a) or host(*a))
    key, shape = jax.random.key(5), (64, 33)
    jitted = np.asarray(jax.jit(lambda k: orthogonal(k, shape, 2.0))(key))
    assert not calls  # traced: the program's own path
    with jax.disable_jit():
        eager = orthogonal(key, shape, 2.0)
        assert len(calls) == 1
        text = str(jax.make_jaxpr(lambda k: orthogonal(k, shape))(key))
    assert isinstance(eager, jax.Array) and eager.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(eager), jitted, atol=2e-6)
    assert "branches_platforms" in text  # a trace (make_jaxpr) keeps the program's path


def test_off_the_cpu_orthogonal_is_jaxs_own_initializer():
    """On a GPU the QR is one library call, where the blocked Gram-Schmidt is a loop of about
    a kernel per column: the program lowered for the CPU holds the loop and no QR, the one
    lowered for a GPU or a TPU JAX's initializer's QR and no loop, whatever the default backend
    (here the CPU). The two paths give the same values to float tolerance (JAX's initializer run
    here on one unbatched QR, which does not deadlock)."""
    key, shape = jax.random.key(3), (400, 256)

    def lowered(platform: str) -> str:
        init = jax.jit(lambda k: orthogonal(k, shape, 2.0))
        return init.trace(key).lower(lowering_platforms=(platform,)).as_text()

    cpu, cuda, tpu = lowered("cpu"), lowered("cuda"), lowered("tpu")
    assert "stablehlo.while" in cpu and "custom_call" not in cpu
    assert "cusolver_geqrf" in cuda and "stablehlo.while" not in cuda
    assert "@Qr" in tpu and "stablehlo.while" not in tpu
    qr = np.asarray(jax.nn.initializers.orthogonal(2.0)(key, shape))
    np.testing.assert_allclose(np.asarray(orthogonal(key, shape, 2.0)), qr, atol=2e-6)  # 4e-7


def test_scan_unrolls_only_where_the_program_is_not_compiled_for_the_cpu():
    """`blocks.loops.scan`: the loop of `jax.lax.scan` with one step per trip in the program
    lowered for the CPU, `unroll` steps per trip in the one lowered for a GPU, and the values of
    `jax.lax.scan` (here, on the CPU), reversed or not."""
    from canter.common.blocks.loops import scan

    def step(carry, x):
        carry = jnp.sin(carry) + x
        return carry, carry * 2.0

    xs = jnp.linspace(0.0, 1.0, 10)
    for reverse in (False, True):
        ours = scan(step, 0.5, xs, reverse=reverse, unroll=4)
        plain = jax.lax.scan(step, 0.5, xs, reverse=reverse)
        for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(plain), strict=True):
            np.testing.assert_array_equal(a, b)
    program = jax.jit(lambda xs: scan(step, 0.5, xs, unroll=4)).trace(xs)
    cpu, cuda = (program.lower(lowering_platforms=(p,)).as_text() for p in ("cpu", "cuda"))
    # 10 steps: one per trip on the CPU; 4 per trip and the 2 left over on a GPU (each step a
    # call of the step's function)
    assert cpu.count("func.call @closed_call") == 1
    assert cuda.count("func.call @closed_call") == 4 + 2
    # The choice is a constant when lowered: XLA folds it, and no conditional runs.
    assert " conditional(" not in program.lower().compile().as_text()


def test_clip_by_global_norm_is_optaxs_with_one_sum_off_the_cpu():
    """`blocks.clipping.clip_by_global_norm`: optax's numbers, bit for bit, on the CPU, clipped
    or not; the program lowered for a GPU sums all leaves' squares in one reduction, the one
    lowered for the CPU leaf by leaf; the GPU's norm is the same to float tolerance."""
    import optax
    from canter.common.blocks.clipping import clip_by_global_norm, flat_norm

    keys = jax.random.split(jax.random.key(0), 3)
    grads = {"w": jax.random.normal(keys[0], (5, 4)), "b": [jax.random.normal(keys[1], (4,))]}
    grads["b"].append(jax.random.normal(keys[2], (2, 3, 2)))
    norm = float(optax.tree.norm(grads))
    for max_norm in (norm / 2, norm * 2):  # clipped, then left alone
        ours, _ = clip_by_global_norm(max_norm).update(grads, optax.EmptyState())
        theirs, _ = optax.clip_by_global_norm(max_norm).update(grads, optax.EmptyState())
        for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(flat_norm(grads), norm, rtol=1e-6)

    def clip(grads):
        return clip_by_global_norm(1.0).update(grads, optax.EmptyState())[0]

    program = jax.jit(clip).trace(grads)
    cpu, cuda = (program.lower(lowering_platforms=(p,)).as_text() for p in ("cpu", "cuda"))
    assert cpu.count("stablehlo.reduce") == 3 and "stablehlo.concatenate" not in cpu
    assert cuda.count("stablehlo.reduce") == 1 and cuda.count("stablehlo.concatenate") == 1
