"""Tiny local models for tests (no hub): a randomly initialised BERT cross-encoder.

No cross-encoder ships on PyPI and the hub is offline, so tests that exercise the
real ``CrossEncoder`` code path build this one from local text in well under a
second. Its scores are arbitrary but deterministic (seeded); tests check the
plumbing, never the relevance. Used by ``tests/stack/conftest.py`` and the
ablation tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path


def build_tiny_cross_encoder(out: Path, texts: Iterable[str], seed: int = 0) -> Path:
    """Save a 2-layer BERT sequence classifier (one label) whose vocabulary is the words of ``texts``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    out.mkdir(parents=True, exist_ok=True)
    words = sorted({w for text in texts for w in re.findall(r"\w+", text.lower())})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(out)
    BertTokenizer(str(out / "vocab.txt")).save_pretrained(out)
    return out
