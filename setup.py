"""Package metadata for the EBM tracking toolkit (ltr + pytracking + eval).

Dependencies are pinned where the machines need them to be: torch 2.14.1 / torchvision 0.29.1 are the
releases that install (and import together) here. OpenCV comes as the *contrib* headless wheel because it
is a superset of opencv-python-headless that also carries the classical CSRT/KCF baselines; two OpenCV
wheels must never share one environment.
"""

from setuptools import find_packages, setup

setup(
    name="ebmtrack",
    version="0.1.0",
    description="Energy-based box regression for visual tracking (DiMP-NCE+), Gustafsson et al. 2020",
    python_requires=">=3.11",
    packages=find_packages(include=["ltr", "ltr.*", "pytracking", "pytracking.*", "eval", "eval.*"]),
    install_requires=[
        "torch==2.14.1",
        "torchvision==0.29.1",
        "opencv-contrib-python-headless>=4.8",
        "numpy>=1.26",
        "scipy>=1.11",
        "pandas>=2.0",
        "tqdm>=4.66",
        "matplotlib>=3.8",
        "visdom==0.2.4",
        "pycocotools>=2.0.7",
        # tornado 6.6 answers 403 for the visdom page (../user/style.css); 6.5 serves it.
        "tornado<6.6",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "hypothesis>=6.100",
            "ruff==0.17.6",  # pinned: a new ruff release must not turn CI red on its own
        ],
    },
    entry_points={
        "console_scripts": [
            "ltr-train=ltr.cli.train:main",
            "ltr-study=ltr.cli.study:main",
        ],
    },
)
