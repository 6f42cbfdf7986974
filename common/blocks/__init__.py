"""Building blocks that change the numbers, shared by name by several algorithm files; each is
tested against a reference (tests/test_buffer.py, test_layers.py, test_invariants.py).

    buffer.py          ReplayBuffer: a fixed-size ring buffer of transitions, sampled uniformly
    initializers.py    orthogonal: PyTorch's orthogonal init without LAPACK (Gram-Schmidt)
    layers.py          Conv2d: Equinox's convolution as a patch matmul (faster on XLA:CPU)
    masking.py         action masks: masked sampling, greedy choice, exploration, max
    normalization.py   RunningStats: observation / return normalisation statistics
"""
