"""Administration: paths, checkpoints, logging."""
