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


@pytest.fixture(scope="session")
def smollm2():
    """The real SmolLM2-135M-Instruct (model, tokenizer), loaded once per session."""
    from elical.generation.models import load_model

    return load_model()
