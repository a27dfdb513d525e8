"""pytracking: the runtime side (trackers, parameters, dataset runner)."""
