"""python eval/run_eval.py --dataset otb --trackers dimp/nce_plus dimp/kld_is (see eval/eval_cli.py)."""

import sys

from eval.eval_cli import main

if __name__ == "__main__":
    sys.exit(main())
