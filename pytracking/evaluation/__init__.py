"""Running trackers over datasets: result files (atomic, resumable) and the (parallel) dataset runner."""
