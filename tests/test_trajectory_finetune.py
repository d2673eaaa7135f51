"""Pattern-based fine-tuning's loss on a tiny random Llama (no download): the one-position head
gives the language-model loss of the verbaliser token."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from shiftwork.trajectory.finetune import PadCollator, verbaliser_loss


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    return LlamaForCausalLM(cfg).eval()


def test_collator_left_pads() -> None:
    batch = PadCollator(pad_id=0)([{"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [0, 8, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [0, 1, 1]]


def test_verbaliser_loss_is_the_masked_language_model_loss() -> None:
    model = tiny_llama()
    rows = [[3, 4, 5, 6, 7, 11], [8, 9, 10, 12]]
    loss = verbaliser_loss(model, PadCollator(pad_id=0)([{"input_ids": r} for r in rows]))
    # independent: each row alone, unpadded, through the model's own loss with only the last token labelled
    per_row = []
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([r])
            labels = torch.full_like(ids, -100)
            labels[0, -1] = r[-1]
            per_row.append(model(input_ids=ids, labels=labels).loss)
    assert float(loss) == pytest.approx(float(torch.stack(per_row).mean()), abs=1e-5)
    # and by hand from the logits at the position before the verbaliser
    with torch.no_grad():
        lp = [torch.log_softmax(model(input_ids=torch.tensor([r])).logits[0, -2], -1)[r[-1]] for r in rows]
    assert abs(float(loss) + float(torch.stack(lp).mean())) < 1e-5
