"""Operations: exact PrRoIPool in pure PyTorch (prroi_pool.py) and box utilities (boxes.py)."""

from ltr.ops.prroi_pool import PrRoIPool, prroi_pool

__all__ = ["PrRoIPool", "prroi_pool"]
