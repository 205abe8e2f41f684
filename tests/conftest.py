import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not found (the project reads real data from ../shared/data)")
    return SHARED_DATA


def _load_script(path: Path):
    """A script that is not a package module (benchmarks/*.py, tests/fixtures/*.py), imported from its path."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_script():
    """``load_script(path)`` -> the module of a script file (benchmarks/*.py and the like), executed once per call."""
    return _load_script


@pytest.fixture(scope="session")
def smollm2():
    """The real SmolLM2-135M-Instruct (model, tokenizer), loaded once per session."""
    from elical.generation.models import load_model

    return load_model()


def pytest_collection_modifyitems(config, items):
    """Every test that loads the real model (the ``smollm2`` fixture, directly or through another fixture) is
    marked ``slow``, so ``-m "not slow"`` gives a quick suite; the default command still runs them all, the
    end-to-end runs with the real model included."""
    real_model = {"smollm2", "run_dir", "swept", "reference"}  # fixtures that load the model or run it
    for item in items:
        if real_model & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
