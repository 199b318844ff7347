# SPDX-License-Identifier: MIT
import os
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, PKG_ROOT)
import _fucina_build  # noqa: E402


def test_backend_builds_a_pure_wheel_of_the_package(tmp_path):
    assert _fucina_build.get_requires_for_build_wheel() == []
    name = _fucina_build.build_wheel(str(tmp_path))
    assert name == "fucina-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        record = z.read("fucina-0.1.0.dist-info/RECORD").decode()
    for mod in ("__init__", "_bindings", "_core", "_lib", "autograd", "errors"):
        assert "fucina/%s.py" % mod in names
        assert "fucina/%s.py,sha256=" % mod in record
    assert not any(n.endswith((".so", ".pyc")) for n in names)


def test_pip_installs_offline(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("pip is not installed for this interpreter")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                        "--target", str(tmp_path / "site"), PKG_ROOT],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site" / "fucina" / "_core.py").exists()
