"""The one registry style: ordered names, lazy references, one error listing the choices."""

import subprocess
import sys

import pytest

from ltr.admin.registry import Registry, UnknownName, resolve


def test_names_keep_table_order_and_values_pass_through():
    reg = Registry("colour", {"red": 1, "green": 2, "blue": 3})
    assert reg.names == ("red", "green", "blue") and list(reg) == list(reg.names) and len(reg) == 3
    assert reg["green"] == 2 and "blue" in reg and "cyan" not in reg
    assert dict(reg.items()) == {"red": 1, "green": 2, "blue": 3}


def test_unknown_name_lists_the_choices_and_is_key_and_value_error():
    reg = Registry("colour", {"red": 1, "green": 2})
    with pytest.raises(UnknownName) as exc:
        reg["cyan"]
    assert (
        str(exc.value) == "unknown colour 'cyan'; choose one of ['red', 'green']"
    )  # not quoted as KeyError's
    assert isinstance(exc.value, KeyError) and isinstance(exc.value, ValueError)
    assert reg.get("cyan") is None  # the Mapping protocol's get


def test_references_resolve_on_first_lookup_only():
    reg = Registry("thing", {"join": "os.path:join", "json": "json", "bad": "json:no_such_attr"})
    assert reg["join"] is __import__("os").path.join
    assert reg["json"] is __import__("json")
    with pytest.raises(ImportError, match="no attribute 'no_such_attr'"):
        reg["bad"]
    with pytest.raises(ModuleNotFoundError):
        resolve("no_such_module_anywhere:x")
    # a reference to a missing module is harmless until it is looked up
    assert "ghost" in Registry("thing", {"ghost": "no_such_module_anywhere:x"})


def test_project_tables_import_no_heavy_module_until_looked_up():
    code = (
        "import sys\n"
        "from ltr.dataset.registry import BENCHMARKS, DATASETS\n"
        "from ltr.train_settings import MODULES\n"
        "assert 'torchvision' not in sys.modules and 'ltr.dataset.coco' not in sys.modules\n"
        "assert 'ltr.train_settings.detection' not in sys.modules\n"
        "assert 'coco' in DATASETS and 'detection' in MODULES and BENCHMARKS['lasot'].dataset == 'lasot_test'\n"
        "assert callable(DATASETS['coco']) and 'ltr.dataset.coco' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
