"""Package metadata for the EBM tracking toolkit (ltr + pytracking + eval).

``install_requires`` gives ranges: the oldest releases the code and its tests are known to work with, no
upper bounds. ``make`` installs the exact versions of this project's machines through constraints.txt.
OpenCV comes as the *contrib* headless wheel because it is a superset of opencv-python-headless that also
carries the classical CSRT/KCF baselines; two OpenCV wheels must never share one environment.

Extras:

- ``visdom``: the live view of training curves and tracking (``--visdom``, ``make visdom``). visdom 0.2.4
  exactly, whose page layout the offline server (:mod:`ltr.admin.visdom_server`) follows; it ships only as a
  source archive that builds with setuptools<81 (constraints.txt passes that to pip's build environment).
  tornado 6.6 answers 403 for the visdom page; 6.5 serves it.
- ``vot``: the TraX server the VOT toolkit drives (``python -m pytracking.vot``): ``vot-trax``. The VOT
  toolkit itself (``vot-toolkit``, which needs the non-contrib opencv-python wheel) goes in an environment of
  its own: ``make install-vot-toolkit`` makes ``.venv-vot`` with the version constraints.txt names.
- ``onnx``: export of the tracker's networks (``python -m pytracking.export_onnx``: ``onnx``, and
  ``onnxscript``, which ``torch.onnx.export`` uses) and the ONNX Runtime tracker backend (``onnxruntime``).
- ``test``: pytest, hypothesis, ruff and the extras the tests use.
"""

from setuptools import find_packages, setup

VISDOM = ["visdom==0.2.4", "tornado<6.6"]
VOT = ["vot-trax>=4.0.1"]
ONNX = ["onnx>=1.17", "onnxruntime>=1.20", "onnxscript>=0.3"]
PHOTOS = ["scikit-image>=0.22"]  # the real-footage validation set's photographs (ltr.dataset.real_footage)

setup(
    name="ebmtrack",
    version="0.1.0",
    description="Energy-based box regression for visual tracking (DiMP-NCE+), Gustafsson et al. 2020",
    python_requires=">=3.11",
    packages=find_packages(include=["ltr", "ltr.*", "pytracking", "pytracking.*", "eval", "eval.*"]),
    install_requires=[
        "torch>=2.13",
        "torchvision>=0.28",  # the release built with torch 2.13
        "opencv-contrib-python-headless>=4.8",
        "numpy>=1.26",
        "scipy>=1.11",
        "pandas>=2.0",
        "tqdm>=4.66",
        "matplotlib>=3.8",
        "pycocotools>=2.0.7",  # COCO for DiMP training and the detection study
    ],
    extras_require={
        "visdom": VISDOM,
        "vot": VOT,
        "onnx": ONNX,
        "photos": PHOTOS,
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "hypothesis>=6.100",
            "ruff==0.17.6",  # pinned: a new ruff release must not turn CI red on its own
            *VISDOM,
            *VOT,
            *ONNX,
            *PHOTOS,
        ],
    },
    entry_points={
        "console_scripts": [
            "ltr-train=ltr.cli.train:main",
            "ltr-study=ltr.cli.study:main",
            "ltr-checkpoint=ltr.admin.checkpoint:main",
            "ltr-visdom=ltr.admin.visdom_server:main",
            "ltr-import-pytracking=ltr.admin.import_pytracking:main",
            "pytracking-run=pytracking.run_tracker:main",
            "pytracking-video=pytracking.run_video:main",
            "pytracking-vot=pytracking.vot.server:main",
            "pytracking-vot-setup=pytracking.vot.workspace:main",
            "ebm-eval=eval.eval_cli:main",
            "ebm-pack=eval.pack_results:main",
        ],
    },
)
