"""The gated Transformer-XL layer of ppo_trxl.py (GTrXL: Parisotto et al. 2019, "Stabilizing
Transformers for Reinforcement Learning"), a network block as `eqx.nn.GRUCell` is ppo_rnn's.

One layer reads a few consecutive query steps and the keys they may attend (cached layer inputs
of earlier steps, then the queries themselves), and is told, per query and key, how many steps
apart they are (`distance`) and whether the query may look (`valid`): the caller's memory
mechanics (which steps are cached, episode boundaries, causality) stay in the algorithm file.

As TransformerXL_PPO_JAX (Reytuag, @ d914d55, read in docs/notes/trxl-reference.md) builds it:
pre-LayerNorm (one norm for the queries and the memory rows), relative multi-head attention
with Transformer-XL's two learned biases (content `u`, position `v`) over sinusoidal distance
codes projected per layer, a GRU-type gate after the attention and after a two-layer GELU
feed-forward of the embedding's width, each gate fed the ReLU of its branch; the gate's bias
`b_g` (learned, per feature) starts at `gate_bias` so that a new layer is close to the
identity. Dense weights LeCun-normal with zero biases (flax's defaults, the reference's).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from canter.common.blocks.initializers import lecun_linear as dense
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray


def apply(layer: eqx.nn.Linear, x: Float[Array, "n in_size"]) -> Float[Array, "n out_size"]:
    """`layer` on a batch of rows, batch-major (as common/blocks/layers.py::MLP multiplies)."""
    y = x @ layer.weight.T
    return y if layer.bias is None else y + layer.bias


def distance_codes(count: int, dim: int) -> Float[Array, "count dim"]:
    """Transformer-XL's sinusoidal codes of the distances 0, 1, ..., count - 1: [sin | cos] of
    the distance times 1 / 10000^(2k / dim), cut to `dim` features."""
    inv_freq = 1.0 / 10_000 ** (jnp.arange(0, dim, 2) / dim)
    angles = jnp.arange(count)[:, None] * inv_freq[None, :]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)[:, :dim]


class GRUGate(eqx.Module):
    """g(x, y) = (1 - z) x + z h, with r = s(W_r y + U_r x), z = s(W_z y + U_z x - b_g) and
    h = tanh(W_g y + U_g (r x)): x is the residual stream, y the branch (GTrXL eq. 7-10)."""

    from_branch: eqx.nn.Linear  # W_r, W_z, W_g stacked, no bias
    from_stream: eqx.nn.Linear  # U_r, U_z stacked, no bias
    candidate: eqx.nn.Linear  # U_g, no bias
    bias: Float[Array, " dim"]  # b_g

    def __init__(self, dim: int, gate_bias: float | Float[Array, ""], key: PRNGKeyArray):
        keys = jax.random.split(key, 3)
        self.from_branch = dense(dim, 3 * dim, keys[0], bias=False)
        self.from_stream = dense(dim, 2 * dim, keys[1], bias=False)
        self.candidate = dense(dim, dim, keys[2], bias=False)
        self.bias = jnp.full(dim, gate_bias)

    def __call__(self, x: Float[Array, "n dim"], y: Float[Array, "n dim"]) -> Float[Array, "n dim"]:
        w_r, w_z, w_g = jnp.split(apply(self.from_branch, y), 3, axis=-1)
        u_r, u_z = jnp.split(apply(self.from_stream, x), 2, axis=-1)
        r = jax.nn.sigmoid(w_r + u_r)
        z = jax.nn.sigmoid(w_z + u_z - self.bias)
        h = jnp.tanh(w_g + apply(self.candidate, r * x))
        return (1.0 - z) * x + z * h


class RelativeAttention(eqx.Module):
    """Multi-head attention whose logits are (q + u).k + (q + v).R[distance], over sqrt(head
    size) (Dai et al. 2019); R projects the sinusoidal code of each distance, per layer."""

    query: eqx.nn.Linear
    key: eqx.nn.Linear
    value: eqx.nn.Linear
    position: eqx.nn.Linear  # no bias
    out: eqx.nn.Linear
    u: Float[Array, "heads head_size"]
    v: Float[Array, "heads head_size"]
    num_heads: int = eqx.field(static=True)

    def __init__(self, dim: int, num_heads: int, key: PRNGKeyArray):
        keys = jax.random.split(key, 5)
        self.query, self.key, self.value = (dense(dim, dim, k) for k in keys[:3])
        self.position = dense(dim, dim, keys[3], bias=False)
        self.out = dense(dim, dim, keys[4])
        self.u = self.v = jnp.zeros((num_heads, dim // num_heads))
        self.num_heads = num_heads

    def __call__(
        self,
        queries: Float[Array, "q dim"],
        keys: Float[Array, "k dim"],
        codes: Float[Array, "distances dim"],
        distance: Int[Array, "q k"],
        valid: Bool[Array, "q k"],
    ) -> Float[Array, "q dim"]:
        def heads(x: Array) -> Array:
            return x.reshape(x.shape[0], self.num_heads, -1)

        q, k = heads(apply(self.query, queries)), heads(apply(self.key, keys))
        v = heads(apply(self.value, keys))
        r = heads(apply(self.position, codes))
        content = jnp.einsum("qhd,khd->hqk", q + self.u, k)
        by_distance = jnp.einsum("qhd,phd->hqp", q + self.v, r)
        index = jnp.broadcast_to(jnp.clip(distance, 0, codes.shape[0] - 1), content.shape)
        logits = (content + jnp.take_along_axis(by_distance, index, axis=2)) / q.shape[-1] ** 0.5
        logits = jnp.where(valid, logits, jnp.finfo(logits.dtype).min)
        mixed = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(logits, axis=-1), v)
        return apply(self.out, mixed.reshape(queries.shape[0], -1))


class GatedTransformerLayer(eqx.Module):
    """One GTrXL layer: gate(x, ReLU(attention(LN(x), LN([memory; x])))), then
    gate(h, ReLU(FF(LN(h)))); without `gating`, plain residual sums (TrXL-I)."""

    norm1: eqx.nn.LayerNorm
    attention: RelativeAttention
    gate1: GRUGate
    norm2: eqx.nn.LayerNorm
    hidden: eqx.nn.Linear
    project: eqx.nn.Linear
    gate2: GRUGate
    gating: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        num_heads: int,
        gating: bool,
        gate_bias: float | Float[Array, ""],
        key: PRNGKeyArray,
    ):
        keys = jax.random.split(key, 5)
        self.norm1, self.norm2 = eqx.nn.LayerNorm(dim), eqx.nn.LayerNorm(dim)
        self.attention = RelativeAttention(dim, num_heads, keys[0])
        self.gate1, self.gate2 = GRUGate(dim, gate_bias, keys[1]), GRUGate(dim, gate_bias, keys[2])
        self.hidden, self.project = dense(dim, dim, keys[3]), dense(dim, dim, keys[4])
        self.gating = gating

    def __call__(
        self,
        x: Float[Array, "q dim"],
        memory: Float[Array, "m dim"],
        codes: Float[Array, "distances dim"],
        distance: Int[Array, "q m_plus_q"],
        valid: Bool[Array, "q m_plus_q"],
    ) -> Float[Array, "q dim"]:
        """`x`: the queries' inputs; `memory`: the cached inputs of the steps before them; the
        keys are [memory; x], so `distance` and `valid` have a column for each."""
        normed = jax.vmap(self.norm1)(jnp.concatenate([memory, x]))
        a = self.attention(normed[memory.shape[0] :], normed, codes, distance, valid)
        h = self.gate1(x, jax.nn.relu(a)) if self.gating else x + a
        f = apply(self.project, jax.nn.gelu(apply(self.hidden, jax.vmap(self.norm2)(h))))
        return self.gate2(h, jax.nn.relu(f)) if self.gating else h + f


class GTrXL(eqx.Module):
    """`num_layers` GTrXL layers over a memory that holds, for each of the `m` steps before the
    queries, the input of every layer at that step (Transformer-XL's cache).

    The q queries are consecutive steps that follow the memory; query i attends the keys at
    most `age[i]` steps back (the caller's episode boundary, at most m) and never ahead, each
    key told its distance. Returns every query's layer inputs (what a memory keeps of them) and
    the last layer's output.
    """

    layers: tuple[GatedTransformerLayer, ...]

    def __init__(
        self,
        dim: int,
        num_layers: int,
        num_heads: int,
        gating: bool,
        gate_bias: float | Float[Array, ""],
        key: PRNGKeyArray,
    ):
        keys = jax.random.split(key, num_layers)
        self.layers = tuple(
            GatedTransformerLayer(dim, num_heads, gating, gate_bias, k) for k in keys
        )

    def __call__(
        self,
        memory: Float[Array, "m layers dim"],
        x: Float[Array, "q dim"],
        age: Int[Array, " q"],
    ) -> tuple[Float[Array, "q layers dim"], Float[Array, "q dim"]]:
        m, q = memory.shape[0], x.shape[0]
        distance = (m + jnp.arange(q))[:, None] - jnp.arange(m + q)[None, :]
        valid = (distance >= 0) & (distance <= age[:, None])
        codes = distance_codes(m + 1, x.shape[-1])
        inputs = []
        for i, layer in enumerate(self.layers):
            inputs.append(x)
            x = layer(x, memory[:, i], codes, distance, valid)
        return jnp.stack(inputs, axis=1), x
