"""pytest set-up: the kvforge package from the build tree (PYTHONPATH, set by ctest), one shared
engine per test module where tests only read, and the repository's test data."""
import os

import pytest

import kvforge

SOURCE_DIR = os.environ.get("KVF_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
DATA_DIR = os.environ.get("KVF_SHARED_DIR", os.path.join(SOURCE_DIR, "tests", "data"))


@pytest.fixture(scope="module")
def llm():
    engine = kvforge.LLM(max_model_len=512, threads=2)
    yield engine
    engine.close()


def wait_until(predicate, what, attempts=2000, step_s=0.005):
    """Polls with a bound and fails with a message (no test depends on timing)."""
    import time
    for _ in range(attempts):
        if predicate():
            return
        time.sleep(step_s)
    pytest.fail(f"timed out waiting for {what}")
