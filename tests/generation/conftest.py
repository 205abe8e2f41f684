"""`elical serve` in its own process for the HTTP tests (test_serve_http.py, test_backends.py, test_serve.py)."""

import os
import subprocess
import sys
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest


class Served(NamedTuple):
    """A running ``python -m elical serve``: its base URL (``http://127.0.0.1:PORT/v1``), process and stderr log."""

    url: str
    proc: subprocess.Popen
    log_path: Path


@contextmanager
def _serving(log_path: Path, args: tuple[str, ...], start_timeout: float = 180.0):
    """``python -m elical serve --port 0 *args`` with one thread, offline; fails the test when the server has not
    printed ``listening on URL`` within ``start_timeout`` seconds; terminated on exit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with open(log_path, "w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "elical", "serve", "--port", "0", *args],
                                stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        line = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=start_timeout)
        if not line or not line[0].startswith("listening on "):
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail(f"the server did not start: {line} {log_path.read_text()[-2000:]}")
        try:
            yield Served(line[0].split()[-1], proc, log_path)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def start_server(tmp_path_factory):
    """``start_server(*args) -> Served``: an ``elical serve`` process with extra options, stopped at the end of the
    test module."""
    with ExitStack() as stack:
        yield lambda *args: stack.enter_context(_serving(tmp_path_factory.mktemp("serve") / "server.log", args))


@pytest.fixture(scope="module")
def served(start_server) -> Served:
    """``elical serve`` with its defaults (the real SmolLM2 on a free port), one per test module."""
    return start_server()
