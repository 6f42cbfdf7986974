"""common/blocks/distributional.py against slow loops: the categorical projection atom by atom
(CleanRL's C51 scatter and FastTD3's after its fix #30), the quantile Huber loss pair by pair,
QR-DQN's fractions and IQN's cosine features."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.blocks.distributional import (
    categorical_projection,
    cosine_features,
    quantile_huber_loss,
    quantile_midpoints,
    signed_hyperbolic,
    signed_parabolic,
    two_hot,
    two_hot_scalar,
)


def cleanrl_projection(probs, target, discount, support):
    """CleanRL's c51.py projection, one atom at a time: floor and ceiling of the image's
    position, the lower one taking all the mass where they coincide."""
    num_atoms = len(support)
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    out = np.zeros_like(probs)
    for b in range(len(probs)):
        for j in range(num_atoms):
            image = min(max(target[b] + discount[b] * support[j], v_min), v_max)
            position = (image - v_min) / delta
            low, up = math.floor(position), math.ceil(position)
            out[b, low] += probs[b, j] * (up + (low == up) - position)
            out[b, up] += probs[b, j] * (position - low)
    return out


def fasttd3_projection(probs, target, discount, support):
    """FastTD3's projection after its fix #30 (fast_td3.py, `projection`), atom by atom."""
    num_atoms = len(support)
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    out = np.zeros_like(probs)
    for b in range(len(probs)):
        for j in range(num_atoms):
            image = min(max(target[b] + discount[b] * support[j], v_min), v_max)
            position = (image - v_min) / delta
            low, up = math.floor(position), math.ceil(position)
            if low == up:  # on an atom: FastTD3 moves one end so that up - low = 1
                if low > 0:
                    low -= 1
                else:
                    up += 1
            out[b, low] += probs[b, j] * (up - position)
            out[b, up] += probs[b, j] * (position - low)
    return out


def test_projection_matches_cleanrl_and_fasttd3_atom_by_atom():
    rng = np.random.default_rng(0)
    support = np.linspace(-10.0, 10.0, 11)
    probs = rng.dirichlet(np.ones(11), size=7)
    # Targets that land on atoms exactly (0 + 0, 2 + 1 * atoms), past each end, generic ones.
    target = np.array([0.0, 30.0, -30.0, 1.3, -4.7, 2.0, 0.25])
    discount = np.array([0.0, 0.9, 0.9, 0.97, 0.5, 1.0, 0.0])
    got = np.asarray(categorical_projection(*map(jnp.asarray, (probs, target, discount, support))))
    np.testing.assert_allclose(got, cleanrl_projection(probs, target, discount, support), atol=1e-6)
    np.testing.assert_allclose(got, fasttd3_projection(probs, target, discount, support), atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-6)  # mass kept
    assert got[0, 5] == pytest.approx(1.0)  # a terminal target of 0: all mass on the 0 atom
    assert got[1, -1] == pytest.approx(1.0) and got[2, 0] == pytest.approx(1.0)  # clipped
    np.testing.assert_allclose(
        got[6, 5:7], [0.875, 0.125], atol=1e-6
    )  # 0.25 of the way: by distance


def quantile_loss_loop(quantiles, targets, taus, kappa):
    """The QR-DQN paper's rho^kappa_tau, pair by pair: summed over the quantiles, averaged over
    the targets and the batch."""
    batch, n, m = quantiles.shape[0], quantiles.shape[1], targets.shape[1]
    total = 0.0
    for b in range(batch):
        for i in range(n):
            for j in range(m):
                u = targets[b, j] - quantiles[b, i]
                if kappa == 0:
                    loss = abs(u)
                elif abs(u) <= kappa:
                    loss = 0.5 * u * u / kappa
                else:
                    loss = abs(u) - 0.5 * kappa
                total += abs(taus[b, i] - (u < 0)) * loss / m
    return total / batch


@pytest.mark.parametrize("kappa", [1.0, 2.0, 0.0])
def test_quantile_huber_loss_matches_the_pairwise_loop(kappa):
    rng = np.random.default_rng(1)
    quantiles = rng.normal(size=(4, 5)).astype(np.float32) * 2
    targets = rng.normal(size=(4, 3)).astype(np.float32) * 2
    taus = rng.random((4, 5)).astype(np.float32)
    got = quantile_huber_loss(jnp.array(quantiles), jnp.array(targets), jnp.array(taus), kappa)
    expected = quantile_loss_loop(quantiles, targets, taus, kappa)
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_quantile_regression_finds_the_quantiles_of_the_targets():
    """Gradient descent on the loss moves each quantile to the tau-quantile of the samples: the
    weights |tau - 1{u<0}| are right way round (swapped, the quantiles would come out reversed)."""
    samples = jnp.asarray(np.random.default_rng(2).exponential(size=(1, 2000)), jnp.float32)
    taus = quantile_midpoints(5)[None]
    loss = lambda q: quantile_huber_loss(q, samples, taus, kappa=0.0)  # noqa: E731
    descend = lambda _, q: q - 0.05 * jax.grad(loss)(q)  # noqa: E731
    quantiles = jax.jit(lambda q: jax.lax.fori_loop(0, 3000, descend, q))(jnp.zeros((1, 5)))
    expected = np.quantile(np.asarray(samples[0]), np.asarray(taus[0]))
    np.testing.assert_allclose(quantiles[0], expected, atol=0.05)


def test_quantile_midpoints_and_cosine_features():
    np.testing.assert_allclose(quantile_midpoints(4), [0.125, 0.375, 0.625, 0.875])
    taus = np.array([0.0, 0.3, 0.9])
    got = np.asarray(cosine_features(jnp.asarray(taus), 4))
    expected = [[math.cos(math.pi * i * t) for i in range(4)] for t in taus]
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_signed_hyperbolic_and_its_inverse_against_the_formulas():
    """h(x) = sign(x)(sqrt(|x|+1) - 1) + 1e-3 x, rlax's values (h(1) = 0.415, h(100) = 9.15),
    and h^-1 undoes it over six orders of magnitude."""
    xs = np.array([-5e4, -300.0, -1.0, -1e-3, 0.0, 0.5, 1.0, 100.0, 500.0, 5e4], np.float64)
    for x in xs:
        want = math.copysign(math.sqrt(abs(x) + 1) - 1, x) + 1e-3 * x
        assert float(signed_hyperbolic(jnp.float32(x))) == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert float(signed_hyperbolic(jnp.float32(1.0))) == pytest.approx(0.4152, abs=1e-4)
    assert float(signed_hyperbolic(jnp.float32(100.0))) == pytest.approx(9.150, abs=1e-3)
    back = signed_parabolic(signed_hyperbolic(jnp.asarray(xs, jnp.float32)))
    np.testing.assert_allclose(back, xs, rtol=1e-4, atol=1e-3)


def test_two_hot_matches_a_loop_over_atoms_and_reads_back():
    """Mass on the two atoms around x by closeness (all on one where x is an atom), x clipped
    to the support; the expectation of the encoding, read through h^-1, is h^-1(x)."""
    bound = 5
    xs = jnp.array([-7.0, -5.0, -2.25, 0.0, 0.3, 3.999, 4.0, 5.0, 6.5])
    got = np.asarray(two_hot(xs, bound))
    for row, x in zip(got, np.asarray(xs), strict=True):
        x = min(max(float(x), -bound), bound)
        want = np.zeros(2 * bound + 1)
        for i, atom in enumerate(range(-bound, bound + 1)):
            if abs(atom - x) < 1:
                want[i] = 1 - abs(atom - x)
        np.testing.assert_allclose(row, want, atol=1e-6)
    assert got.shape == (9, 11) and np.allclose(got.sum(-1), 1.0)
    logits = jnp.log(two_hot(xs, bound) + 1e-12)
    want = signed_parabolic(jnp.clip(xs, -bound, bound))
    np.testing.assert_allclose(two_hot_scalar(logits), want, rtol=1e-4, atol=1e-4)
