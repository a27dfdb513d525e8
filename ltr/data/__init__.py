"""Training data: sampler -> processing (crops, jitter, labels, proposals) -> transforms -> loader."""
