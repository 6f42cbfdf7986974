"""Building blocks that change the numbers, shared by name by several algorithm files; each is
tested against a reference (tests/test_buffer.py, test_distributional.py, test_layers.py,
test_invariants.py, test_masking.py).

    buffer.py          ReplayBuffer: a fixed-size ring buffer of transitions, sampled uniformly
    distributional.py  return distributions: C51's categorical projection, the quantile Huber
                       loss (QR-DQN, IQN), IQN's cosine features, MuZero's two-hot
                       categorical scalars under h(x) = sign(x)(sqrt(|x|+1)-1)+eps x
    initializers.py    orthogonal: PyTorch's orthogonal init without LAPACK (Gram-Schmidt);
                       orthogonal_linear: the PPO files' dense layer (orthogonal, zero bias)
    layers.py          MLP: the PPO files' actor and critic (depth hidden layers, tanh or ReLU);
                       Conv2d: Equinox's convolution as a patch matmul (faster on XLA:CPU)
    loops.py           scan: lax.scan unrolled in programs for a GPU or TPU (the same numbers)
    masking.py         action masks: masked sampling, greedy choice, exploration, max
    normalization.py   RunningStats: observation / return normalisation statistics
"""
