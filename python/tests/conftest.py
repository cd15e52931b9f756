import os
import pathlib
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The plan cache of these tests: a directory of their own, never the user's (set before the first plan).
CACHE_DIR = tempfile.mkdtemp(prefix="rime-pytest-cache-")


def pytest_configure(config):
    import rime
    rime.set_cache_dir(CACHE_DIR)


@pytest.fixture
def root():
    return ROOT


def example(name):
    return (ROOT / "examples" / f"{name}.json").read_text()


def examples():
    return sorted(p.stem for p in (ROOT / "examples").glob("*.json"))


def rime_cli():
    """The CLI of the same source tree (scripts/test.sh builds it first), or None."""
    for p in (ROOT / "build" / "rime", pathlib.Path(os.environ.get("RIME_CLI", "/nonexistent"))):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None
