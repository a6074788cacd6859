"""A tiny Qwen3-style tokenizer trained here on local text, so no trainer test downloads one.

A byte-level BPE over the tool descriptions and a tool call, with Qwen3's special
tokens and TRL's shipped Qwen3 chat template (which renders tools, tool calls and
``<tool_response>`` turns). The TRL test trains a tiny random model with it; the
ART test runs ART's tokenization of our trajectories through it; the adapter benchmark
(``adapter_drivers``) tokenizes OpenRLHF's turns with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


def tiny_qwen3_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` of 1024 tokens with the Qwen3 chat template (needs trl)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    from analyst_env.server.tools import TOOLS

    corpus = [t.description for t in TOOLS.values()] + [
        '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "7319.25"}}\n</tool_call>',
        "What is the total amount in sales.csv? Answer with the number. region amount "
        "north south east",
    ] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=1024,
            special_tokens=SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    hf.chat_template = qwen3_chat_template
    return hf


def save_tiny_qwen3(path: Path) -> Path:
    """The tokenizer and a two-layer Qwen3 config (no weights) in ``path``: a model folder
    that veRL's ``HFModelConfig`` loads from disk."""
    from transformers import Qwen3Config

    tok = tiny_qwen3_tokenizer()
    tok.save_pretrained(path)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    config.architectures = ["Qwen3ForCausalLM"]
    config.save_pretrained(path)
    return path
