"""A small causal language model initialised from scratch, with a character-level tokenizer.

The organisms study needs a model it can train fully on a 2-core CPU in minutes. A subword
vocabulary of 50k entries would make the output layer the largest part of every step, so the
tokenizer here has one token per printable ASCII character (plus newline) and four special tokens;
it is built by this module, deterministically, and saved with the model, so a prepared scratch
model is a plain Hugging Face directory like any other.

Architecture keys (all optional): ``architecture`` (``llama``, rotary positions, or ``gpt2``,
learned absolute positions), ``hidden_size`` (128), ``layers`` (4), ``heads`` (4),
``intermediate_size`` (4 x hidden), ``max_positions`` (256), ``seed`` (0). ``extra_characters``
(a string, default none) adds one token per further character after the ASCII ones, e.g. the
Chinese characters of the organisms' ``language`` trigger; without it the tokenizer is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast


SPECIAL_TOKENS: dict[str, str] = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
ALPHABET: str = "\n" + "".join(chr(c) for c in range(32, 127))
ARCHITECTURES: tuple[str, ...] = ("llama", "gpt2")
OTHER_KEYS: tuple[str, ...] = ("architecture", "extra_characters")
ARCH_KEYS: dict[str, int] = {
    "hidden_size": 128,
    "layers": 4,
    "heads": 4,
    "intermediate_size": 0,  # 0 means 4 x hidden_size
    "max_positions": 256,
    "seed": 0,
}


def char_tokenizer(extra_characters: str = "") -> PreTrainedTokenizerFast:
    """A fast tokenizer with one token per character of :data:`ALPHABET`, then one per character of
    ``extra_characters`` not already in it (in order); decoding joins characters back without
    spaces, so ``decode(encode(text)) == text`` for text of those characters."""
    if not isinstance(extra_characters, str):
        raise ValueError(f"scratch model key 'extra_characters' must be a string, got {extra_characters!r}")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS.values())}
    for ch in ALPHABET + extra_characters:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    bos = SPECIAL_TOKENS["bos_token"]
    core.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
    )
    return PreTrainedTokenizerFast(tokenizer_object=core, clean_up_tokenization_spaces=False, **SPECIAL_TOKENS)


def check_architecture(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The architecture with defaults filled in; unknown keys and non-positive sizes are errors."""
    unknown = sorted(set(spec) - set(ARCH_KEYS) - set(OTHER_KEYS))
    if unknown:
        raise ValueError(
            f"scratch model: unknown key(s) {unknown}; known keys are {sorted(ARCH_KEYS) + list(OTHER_KEYS)}"
        )
    kind = spec.get("architecture", "llama")
    if kind not in ARCHITECTURES:
        raise ValueError(f"scratch model key 'architecture' must be one of {list(ARCHITECTURES)}, got {kind!r}")
    arch = {**ARCH_KEYS, **{k: v for k, v in spec.items() if k not in OTHER_KEYS}}
    for key, value in arch.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < (0 if key in ("seed", "intermediate_size") else 1)
        ):
            raise ValueError(f"scratch model key '{key}' must be a positive integer, got {value!r}")
    if arch["hidden_size"] % arch["heads"]:
        raise ValueError(f"scratch model: hidden_size {arch['hidden_size']} is not divisible by heads {arch['heads']}")
    if not arch["intermediate_size"]:
        arch["intermediate_size"] = 4 * arch["hidden_size"]
    return {**arch, "architecture": kind}


def scratch_model(spec: Mapping[str, Any]) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """(model, tokenizer): a model with seeded random weights. ``architecture: llama`` (rotary
    positions) or ``gpt2`` (learned absolute positions)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    arch = check_architecture(spec)
    tok = char_tokenizer(spec.get("extra_characters", ""))
    torch.manual_seed(arch["seed"])
    if arch["architecture"] == "gpt2":
        config = GPT2Config(
            vocab_size=len(tok),
            n_positions=arch["max_positions"],
            n_embd=arch["hidden_size"],
            n_layer=arch["layers"],
            n_head=arch["heads"],
            n_inner=arch["intermediate_size"],
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            tie_word_embeddings=True,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
        model = GPT2LMHeadModel(config)
        model.generation_config.pad_token_id = tok.pad_token_id
        return model, tok
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=arch["hidden_size"],
        intermediate_size=arch["intermediate_size"],
        num_hidden_layers=arch["layers"],
        num_attention_heads=arch["heads"],
        num_key_value_heads=arch["heads"],
        max_position_embeddings=arch["max_positions"],
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok
