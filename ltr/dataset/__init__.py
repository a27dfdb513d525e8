"""Sequence readers for every benchmark and the embedded synthetic video dataset.

All readers implement :class:`ltr.dataset.base.SequenceDataset` and are found by name through
:func:`ltr.dataset.registry.get_dataset`: ``lasot``, ``lasot_test``, ``got10k``, ``got10k_val``,
``got10k_test``, ``trackingnet``, ``trackingnet_test``, ``coco``, ``otb``, ``uav``, ``nfs``, ``vot``,
``folder``, ``synthetic``. Roots come from ``--root`` or the variables of
:data:`ltr.admin.paths.DATASET_VARS`; check a dataset on disk with
``python -m ltr.dataset.check <name> [--root DIR] [--split NAME] [--json FILE]``.
"""
