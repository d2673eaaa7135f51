"""vLLM generation and the probe pass on a CUDA machine, at the sizes of two paper models.

    .venv/bin/python bench/gpu_check.py [--shapes qwen2.5-1.5b qwen2.5-7b] [--prompts 512]

No model hub is reachable from the lent machines, so each model is built here with the
published shape of Qwen2.5-1.5B-Instruct or Qwen2.5-7B-Instruct (layers, widths, heads,
vocabulary) and random bfloat16 weights, saved as safetensors, and given SmolLM2's tokenizer
(its ids are all inside both vocabularies). Speed depends on the shape, not on the weights'
values; responses are meaningless, so generation ignores end-of-sequence tokens and every
row decodes ``--new-tokens`` tokens. For each shape it reports:

- vLLM start-up, then generation of ``--prompts`` prompts: tokens/s;
- the decode roofline share at batch 1 and at ``--prompts``: the time a decode step must take
  to read the weights and the rows' key/value cache once from HBM (``--hbm-tb-s``, H200: 4.8),
  over the measured step time (from two runs that differ only in new tokens);
- the probe pass (:func:`shiftwork.inference.probe.probe_batches`, transformers, bfloat16) on
  the same prompts with their responses: pairs/s.

Results: ``--out`` (JSON) and a Markdown table on stdout. Meant to finish in under 10 minutes.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# published shapes (config.json of each model)
SHAPES = {
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
}


def build(shape: str, out: Path, tokenizer_dir: Path) -> int:
    """A Qwen2 model of ``shape`` with random bfloat16 weights in ``out``; its weight bytes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    config = Qwen2Config(
        **SHAPES[shape], max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6, torch_dtype="bfloat16"
    )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return size


def prompts(n: int) -> list[str]:
    subjects = ["rivers", "prime numbers", "bread", "volcanoes", "chess", "tides", "bees", "glass"]
    return [f"Question {i}: explain {subjects[i % len(subjects)]} to a student in plain words." for i in range(n)]


def generate_check(model_dir: Path, texts: list[str], new_tokens: int, weight_bytes: int, hbm: float) -> dict:
    import torch
    from transformers import AutoConfig
    from vllm import LLM, SamplingParams

    from shiftwork.inference.batching import kv_token_bytes

    start = time.perf_counter()
    llm = LLM(model=str(model_dir), dtype="bfloat16", max_model_len=1024, seed=0, gpu_memory_utilization=0.8)
    ready = time.perf_counter()

    def run(batch: list[str], tokens: int, engine=llm) -> float:
        params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
        t = time.perf_counter()
        outs = engine.generate(batch, params, use_tqdm=False)
        assert all(len(o.outputs[0].token_ids) == tokens for o in outs)
        return time.perf_counter() - t

    run(texts[:8], 8)  # warm-up
    long, short = run(texts, new_tokens), run(texts, new_tokens // 4)
    one_long, one_short = run(texts[:1], new_tokens), run(texts[:1], new_tokens // 4)
    steps = new_tokens - new_tokens // 4
    prompt_len = max(len(p.prompt_token_ids) for p in llm.generate(texts[:1], SamplingParams(max_tokens=1)))
    kv = kv_token_bytes(AutoConfig.from_pretrained(model_dir), torch.bfloat16)

    def share(rows: int, seconds: float) -> float:
        # bytes one decode step must read: the weights once, and each row's cache at mid-length
        need = weight_bytes + rows * kv * (prompt_len + new_tokens // 2)
        return (need / (hbm * 1e12)) / (seconds / steps)

    result = {
        "engine_start_s": round(ready - start, 1),
        "generate_s": round(long, 2),
        "tokens_per_s": round(len(texts) * new_tokens / long, 1),
        "decode_step_ms_batch": round(1000 * (long - short) / steps, 3),
        "decode_step_ms_1": round(1000 * (one_long - one_short) / steps, 3),
        "roofline_share_batch": round(share(len(texts), long - short), 3),
        "roofline_share_1": round(share(1, one_long - one_short), 3),
    }
    outs = llm.generate(texts, SamplingParams(temperature=0.0, max_tokens=new_tokens // 4), use_tqdm=False)
    result["responses"] = [o.outputs[0].text for o in outs]
    engine = getattr(llm.llm_engine, "engine_core", None)
    if engine is not None:
        engine.shutdown()
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    return result


def probe_check(model_dir: Path, texts: list[str], responses: list[str], batch_size: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from shiftwork.inference.probe import probe_batches
    from shiftwork.models.loading import LoadedModel, load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, attn_implementation="sdpa").cuda()
    lm = LoadedModel(
        "check", model.eval(), load_tokenizer(model_dir, "left"), torch.device("cuda"), torch.bfloat16, False, {}
    )
    list(probe_batches(lm, texts[:8], responses[:8], batch_size))  # warm-up
    torch.cuda.synchronize()
    t = time.perf_counter()
    n = sum(len(b) for b in probe_batches(lm, texts, responses, batch_size))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    result = {"probe_s": round(seconds, 2), "pairs_per_s": round(n / seconds, 1)}
    result["probe_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model, lm
    gc.collect()
    torch.cuda.empty_cache()
    return result


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--prompts", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="probe pass batch size (grown to the GPU's memory)")
    p.add_argument("--hbm-tb-s", type=float, default=4.8, help="the GPU's memory bandwidth, TB/s (H200: 4.8)")
    p.add_argument("--work", default="/tmp/shiftwork-gpu-check")
    p.add_argument("--out", default=str(ROOT / "results" / "bench" / "gpu_check.json"))
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_check: torch sees no CUDA device")
    import yaml

    from shiftwork.models.prepare import prepared_dir

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    tokenizer_dir = prepared_dir("smollm2-135m-instruct", config["models"]["smollm2-135m-instruct"], ROOT / "results")
    texts = prompts(args.prompts)
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "shapes": {}}
    for shape in args.shapes:
        model_dir = Path(args.work) / shape
        shutil.rmtree(model_dir, ignore_errors=True)
        t = time.perf_counter()
        weight_bytes = build(shape, model_dir, tokenizer_dir)
        built = round(time.perf_counter() - t, 1)
        gen = generate_check(model_dir, texts, args.new_tokens, weight_bytes, args.hbm_tb_s)
        probe = probe_check(model_dir, texts, gen.pop("responses"), args.batch_size)
        report["shapes"][shape] = {"weight_gib": round(weight_bytes / 2**30, 2), "build_s": built, **gen, **probe}
        print(shape, report["shapes"][shape], flush=True)
        shutil.rmtree(model_dir, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{report['gpu']}, {args.prompts} prompts x {args.new_tokens} new tokens, bfloat16\n")
    print(
        "| shape | vLLM start s | tokens/s | decode step ms (batch / 1) | roofline share (batch / 1) | probe pairs/s |"
    )
    print("|---|---:|---:|---|---|---:|")
    for shape, r in report["shapes"].items():
        print(
            f"| {shape} | {r['engine_start_s']} | {r['tokens_per_s']} | {r['decode_step_ms_batch']} / "
            f"{r['decode_step_ms_1']} | {r['roofline_share_batch']} / {r['roofline_share_1']} | {r['pairs_per_s']} |"
        )
    return report


if __name__ == "__main__":
    main()
