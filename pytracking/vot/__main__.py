"""``python -m pytracking.vot``: the TraX server (:mod:`pytracking.vot.server`)."""

import sys

from pytracking.vot.server import main

sys.exit(main())
