# SPDX-License-Identifier: MIT
"""A PEP 517 build backend for the pure-Python package fucina/.

It writes a py3-none-any wheel of fucina/*.py with the metadata of
pyproject.toml's [project] name, version, description and requires-python,
using the standard library only, so pip needs no network to install it.
"""
import base64
import hashlib
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))


def _project():
    with open(os.path.join(_HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    body = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return {k: v for k, v in re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', body, flags=re.M)}


def _sources():
    pkg = os.path.join(_HERE, "fucina")
    return sorted("fucina/" + n for n in os.listdir(pkg) if n.endswith(".py"))


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    name, version = p["name"], p["version"]
    dist_info = "%s-%s.dist-info" % (name, version)
    files = [(src, open(os.path.join(_HERE, src), "rb").read()) for src in _sources()]
    files.append((dist_info + "/METADATA", (
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
        % (name, version, p.get("description", ""), p.get("requires-python", ""))).encode()))
    files.append((dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: _fucina_build\n"
                  b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = "\n".join([_record_line(n, d) for n, d in files] + [dist_info + "/RECORD,,", ""])
    files.append((dist_info + "/RECORD", record.encode()))
    wheel = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            z.writestr(n, d)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    out = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, out), "w:gz") as t:
        for rel in ["pyproject.toml", "_fucina_build.py"] + _sources():
            t.add(os.path.join(_HERE, rel), arcname=base + "/" + rel)
    return out
