"""The public API: every name in elical.__all__ resolves, lazily, to the object of its defining module."""

import importlib
import subprocess
import sys
from importlib import metadata

import elical


def test_version_comes_from_the_installed_metadata():
    assert elical.__version__ == metadata.version("elical")


def test_every_public_name_resolves_to_its_module_object():
    for name, module in elical._EXPORTS.items():
        assert getattr(elical, name) is getattr(importlib.import_module(module), name), name


def test_import_is_light():
    code = "import sys, elical; print(int('torch' in sys.modules), int('transformers' in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "0"]
