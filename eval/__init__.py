"""eval: benchmark analysis: metrics, curves, tables, plots, submission packers."""
