"""The real SGLang server the SGLang tests of this package share (tests/sglang_shared.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sglang_real import MODEL_DIR, PYTHON, require
from tests.sglang_shared import Shared, shared_sglang


@pytest.fixture(scope="package")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """One real SGLang for every test here that attaches to a server or observes one: started
    when the first asks (test_sglang_cpu.py), stopped after this package's last test (its
    scheduler sleeps while idle: --sleep-on-idle)."""
    require(PYTHON)
    require(MODEL_DIR / "model.safetensors")
    with shared_sglang(tmp_path_factory.mktemp("shared-sglang")) as shared:
        yield shared
