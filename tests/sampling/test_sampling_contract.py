"""The bundled loop (or the one --onebit-loop names) held to S1..S4: sampled speculative
decoding keeps the target's distribution exactly."""

from pytest_onebit.sampling.suite import SamplingContract


class TestSampledLoop(SamplingContract):
    """S1/S4 over every sampling head kind, both round kinds, k = 1..4 and four samplings
    (temperature, top-k, top-p) on a 4-token toy; S2/S3 on a 64-token toy over 24 tokens."""
