"""The paper's illustrative 1D regression study (section 4.1, appendix B).

Modules: :mod:`~ltr.regression_1d.data` (the two datasets and their true densities),
:mod:`~ltr.regression_1d.config` (one training run's config, the paper's per-dataset hyperparameters),
:mod:`~ltr.regression_1d.ensemble` (R models trained at once, batched over stacked weights),
:mod:`~ltr.regression_1d.single` (one model on the generic trainer), :mod:`~ltr.regression_1d.evaluate`
(D_KL on the paper's grid), :mod:`~ltr.regression_1d.study` (the study: runs, results.json, table, figures),
:mod:`~ltr.regression_1d.report` (table and figures), :mod:`~ltr.regression_1d.paper` (the published numbers).
"""
