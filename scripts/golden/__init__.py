"""The subcommands of ``scripts/pytracking_golden.py``, one module each, and the bootstrap they share."""
