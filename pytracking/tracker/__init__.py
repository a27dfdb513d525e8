"""Trackers of the runtime side; ``dimp`` is DiMP with energy-based box refinement (DiMP-NCE+)."""
