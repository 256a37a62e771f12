"""Loading a model draws none of transformers' bars, and leaves the user's setting as it was."""

from __future__ import annotations

import pytest

from pytest_ragmetrics.stack import Embedder


@pytest.mark.slow  # loads torch (a model)
@pytest.mark.parametrize("enabled", [True, False])
def test_loading_the_encoder_draws_no_bar(capfd: pytest.CaptureFixture[str], enabled: bool) -> None:
    from transformers.utils import logging as hf_logging

    (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
    try:
        Embedder(cache_path=None, backend="torch").model  # noqa: B018 (loads it)
        assert "Loading weights" not in capfd.readouterr().err
        assert hf_logging.is_progress_bar_enabled() is enabled
    finally:
        hf_logging.enable_progress_bar()
