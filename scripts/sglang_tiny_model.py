"""Write a tiny random-weight Llama model SGLang can serve on a CPU, with nothing downloaded.

    .sglang/venv/bin/python scripts/sglang_tiny_model.py .sglang/models/tiny-llama

A ``LlamaForCausalLM`` of 5 M parameters (hidden 256, 4 layers, bf16) with a byte-level BPE
tokenizer trained here on a few kilobytes of generated text. Random weights make no sense, but
they cost the server exactly what trained weights of that shape cost, which is all a throughput
test measures. Seeded, so the same script writes the same model. Runs in the SGLang venv, which
has ``transformers`` and ``tokenizers``; about 7 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

VOCAB = 4096
SEED = 1234


def corpus() -> list[str]:
    """Training text for the tokenizer: English words and digits in a fixed, seeded order."""
    import random

    rng = random.Random(SEED)
    words = (
        "the model serves tokens per second under load with batching speculation draft target "
        "verify accept length latency throughput request stream concurrency server client golden "
        "baseline regression noise margin verdict pass fail warn measure run launch capture graph "
        "kernel attention cache memory prefill decode token prompt output input answer question"
    ).split()
    lines = []
    for _ in range(4000):
        lines.append(" ".join(rng.choice(words) for _ in range(12)) + f" {rng.randrange(10**6)}.")
    return lines


def write(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(SEED)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<s>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    # A minimal chat template, so /v1/chat/completions works too.
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        torch_dtype="bfloat16",
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    fast.save_pretrained(out)


if __name__ == "__main__":
    write(Path(sys.argv[1]))
