"""python ltr/run_training.py <module> <setting> [key=value ...] (see ltr/cli/train.py)."""

from ltr.cli.train import main

if __name__ == "__main__":
    main()
