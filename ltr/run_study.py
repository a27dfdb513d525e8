"""python ltr/run_study.py regression_1d [options] (see ltr/cli/study.py)."""

from ltr.cli.study import main

if __name__ == "__main__":
    main()
