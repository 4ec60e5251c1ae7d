"""Shared helpers for the training tests: a micro tiny model built once per session."""

from pathlib import Path

import pytest

from training.config import build_config


@pytest.fixture(scope="session")
def micro_model_dir(tmp_path_factory) -> Path:
    """A micro warm-started model saved as an HF folder (built once; a few seconds)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.tiny import build_initial_model, supervised_warmstart

    cfg = build_config("micro")
    out = tmp_path_factory.mktemp("micro_model")
    build_initial_model(out, cfg)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    supervised_warmstart(model, tok, cfg, log=lambda *_: None)
    model.save_pretrained(out)
    return out
