"""The VOT challenge's own toolkit runs this toolkit's trackers over TraX.

- :mod:`pytracking.vot.server`: the TraX server (``python -m pytracking.vot dimp nce_plus --net CKPT``);
- :mod:`pytracking.vot.workspace`: writes the ``trackers.ini`` entry (and a new workspace) in one step;
- :mod:`pytracking.vot.sequences`: writes any of our datasets in VOT's sequence layout;
- :mod:`pytracking.vot.regions`: polygon and rectangle regions to the tracker's box.

The server needs the ``vot`` extra (``pip install 'ebmtrack[vot]'``: the ``vot-trax`` package); the VOT
toolkit itself (``vot-toolkit``) may live in any environment.
"""
