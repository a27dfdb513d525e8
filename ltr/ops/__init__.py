"""Operations: exact PrRoIPool in pure PyTorch (prroi_pool.py) and box utilities (boxes.py)."""
