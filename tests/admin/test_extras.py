"""A missing optional dependency is one line naming the extra that installs it."""

import sys

import pytest

from ltr.admin import visdom_server
from ltr.admin.extras import MissingExtra, import_extra
from ltr.admin.stats import VisdomPlotter, VisdomUnavailable
from pytracking.visdom_view import VisdomView


def test_import_extra_returns_the_module():
    assert import_extra("json", "test") is sys.modules["json"]


def test_a_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "visdom", None)  # as if visdom were not installed
    with pytest.raises(MissingExtra) as info:
        import_extra("visdom", "visdom")
    message = str(info.value)
    assert "\n" not in message and "pip install 'ebmtrack[visdom]'" in message
    assert isinstance(info.value, ImportError)


def test_a_broken_dependency_of_an_installed_module_is_not_disguised(tmp_path, monkeypatch):
    (tmp_path / "needs_missing.py").write_text("import surely_not_installed_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        import_extra("needs_missing", "some_extra")
    assert not isinstance(info.value, MissingExtra)
    assert info.value.name == "surely_not_installed_module_xyz"


def test_visdom_users_fail_with_one_line_without_visdom(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "visdom", None)
    with pytest.raises(VisdomUnavailable, match=r"pip install 'ebmtrack\[visdom\]'"):
        VisdomPlotter(env="test", port=1)
    with pytest.raises(MissingExtra, match=r"pip install 'ebmtrack\[visdom\]'"):
        VisdomView(port=1)
    assert visdom_server.main(["--skip-assets", "--port", "8097"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'ebmtrack[visdom]'" in err
