"""The prepared tokenizer of a GGUF model adds the special tokens the GGUF records
(shiftwork.models.gguf_tokens): on a hand-written GGUF and a tiny tokenizer, and on the packaged
Gemma 3 270M, whose answers depend on its BOS token."""

import math

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from shiftwork.models.gguf_tokens import honour_flags, special_token_flags


def write_gguf(path, **flags):
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in flags.items():
        writer.add_bool(f"tokenizer.ggml.{key}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2, "a": 3, "b": 4}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>")


def test_flags_are_read_as_the_gguf_records_them(tmp_path):
    assert special_token_flags(write_gguf(tmp_path / "both.gguf", add_bos_token=True, add_eos_token=False)) == {
        "add_bos_token": True,
        "add_eos_token": False,
    }
    assert special_token_flags(write_gguf(tmp_path / "none.gguf")) == {}


def test_a_tokenizer_without_its_bos_token_gets_it():
    tok = tiny_tokenizer()
    assert tok("a b")["input_ids"] == [3, 4]  # as transformers' GGUF conversion leaves Gemma's
    assert honour_flags(tok, {"add_bos_token": True, "add_eos_token": False}, "x.gguf") == ["add_bos_token"]
    assert tok("a b")["input_ids"] == [1, 3, 4]
    assert tok("a b", add_special_tokens=False)["input_ids"] == [3, 4]
    assert honour_flags(tok, {"add_bos_token": True}, "x.gguf") == []  # already right: nothing changes


def test_flags_that_ask_for_nothing_change_nothing():
    tok = tiny_tokenizer()
    assert honour_flags(tok, {"add_bos_token": False}, "x.gguf") == []
    assert tok("a")["input_ids"] == [3]


@pytest.mark.model
def test_prepared_gemma_reads_english_with_its_bos_token(tmp_path, default_config):
    """Gemma 3 270M as the workflow prepares it: the tokenizer starts every text with <bos>, and
    the model's perplexity on a plain English sentence is that of a language model (13 here;
    743 without the BOS token). About 2 minutes: the GGUF is assembled and de-quantized."""
    import torch

    from shiftwork.models.loading import load_prepared
    from shiftwork.models.prepare import prepare_folder

    out = tmp_path / "gemma"
    prepare_folder("gemma3-270m", default_config["models"]["gemma3-270m"], out)
    lm = load_prepared(out, dtype="float32", device="cpu")
    text = "The cat sat on the mat. It was a sunny day, and the children were playing in the park near their house."
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids[0, 0].item() == lm.tokenizer.bos_token_id == 2
    with torch.no_grad():
        loss = lm.model(input_ids=ids, labels=ids).loss
    assert math.exp(float(loss)) < 40
