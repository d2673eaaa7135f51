"""Progress lines of long jobs: what they say, the time left, how often they come; on a clock the
test moves by hand, so every line is known in advance."""

import logging
from types import SimpleNamespace

import pytest

from shiftwork.progress import Progress, duration, metrics_text, pace, report_training, tracked, training_callback


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def log():
    """A logger and the messages it received."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("shiftwork.test_progress")
    logger.handlers = [Keep()]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, lines


def test_durations_and_paces():
    assert duration(0) == "0s"
    assert duration(59.4) == "59s"
    assert duration(59.6) == "1m00s"
    assert duration(3723) == "1h02m03s"
    assert duration(-3) == "0s"
    assert pace(1.25) == "1.25/s"
    assert pace(0.08) == "12.5 s each"


def test_lines_and_time_left(log):
    logger, lines = log
    clock = Clock()
    p = Progress("generate", 200, "prompts", logger, interval=30, clock=clock)
    assert lines == ["generate: 0/200 prompts (0.0%), 0s elapsed, ETA unknown"]
    clock.t += 40
    p.update(50)  # 50 in 40 s: 1.25 a second, 150 left take 120 s
    assert lines[-1] == "generate: 50/200 prompts (25.0%), 40s elapsed, 1.25/s, ETA 2m00s"
    clock.t += 80
    p.update(150)  # all 200 in 120 s
    assert lines[-1] == "generate: 200/200 prompts (100.0%) done in 2m00s, 1.67/s"
    p.close()  # the last line is out already
    assert len(lines) == 3


def test_slow_units_and_a_resumed_count(log):
    logger, lines = log
    clock = Clock()
    slow = Progress("SFT", 10, "steps", logger, clock=clock)
    clock.t += 25
    slow.set(2)  # 2 in 25 s: 12.5 s each, 8 left take 100 s
    assert lines[-1] == "SFT: 2/10 steps (20.0%), 25s elapsed, 12.5 s each, ETA 1m40s"
    # resumed at step 100 of 200: the rate counts only the steps done since (50 in 50 s)
    resumed = Progress("RL", 200, "steps", logger, start=100, clock=clock)
    assert lines[-1] == "RL: 100/200 steps (50.0%), 0s elapsed, ETA unknown"
    clock.t += 50
    resumed.set(150)
    assert lines[-1] == "RL: 150/200 steps (75.0%), 50s elapsed, 1/s, ETA 50s"


def test_a_line_every_interval_or_fraction_and_at_the_end(log):
    logger, lines = log
    clock = Clock()
    p = Progress("probe", 120, "rows", logger, interval=25, fraction=0.5, clock=clock)
    for _ in range(120):  # one row a second
        clock.t += 1
        p.update()
    # 25 s after the start, 25 s later, the half-way mark at 60 before 75 s, then 25 s after it,
    # again, and the end
    counts = [int(line.split(":")[1].split("/")[0]) for line in lines]
    assert counts == [0, 25, 50, 60, 85, 110, 120]
    assert lines[-1] == "probe: 120/120 rows (100.0%) done in 2m00s, 1/s"


def test_an_early_stop_and_an_empty_job(log):
    logger, lines = log
    clock = Clock()
    p = Progress("RL stage 0", 100, "steps", logger, interval=30, clock=clock)
    clock.t += 10
    p.set(20)  # a tenth mark: a line
    clock.t += 5
    p.set(25)  # not due
    assert len(lines) == 2
    p.close()  # stopped at 25: the count goes out
    assert lines[-1] == "RL stage 0: 25/100 steps (25.0%), 15s elapsed, 1.67/s, ETA 45s"
    Progress("nothing", 0, "rows", logger, clock=clock).update(3)
    assert len(lines) == 3
    with pytest.raises(ValueError, match="interval"):
        Progress("x", 1, interval=0)


def test_tracked_counts_each_item_after_its_work(log):
    logger, lines = log
    clock = Clock()
    p = Progress("batches", 6, "rows", logger, interval=1000, fraction=1.0, clock=clock)
    seen = []
    for batch in tracked([[1, 2], [3, 4, 5], [6]], p):
        seen.append((batch, p.done))
        clock.t += 3
    assert seen == [([1, 2], 0), ([3, 4, 5], 2), ([6], 5)]
    assert lines == [
        "batches: 0/6 rows (0.0%), 0s elapsed, ETA unknown",
        "batches: 6/6 rows (100.0%) done in 9s, 1.5 s each",
    ]


def test_metrics_text():
    logs = {"loss": 0.693147, "learning_rate": 2e-05, "epoch": 0.5, "step": 3, "total_flos": 1e9, "note": "x"}
    assert metrics_text(logs) == "loss 0.6931, learning_rate 2e-05, epoch 0.5, step 3"


def test_training_callback_steps_and_metrics(log):
    logger, lines = log
    clock = Clock()
    cb = training_callback("finetune", logger, interval=30, clock=clock)
    state = SimpleNamespace(max_steps=40, global_step=0)
    cb.on_train_begin(None, state, None)
    for step in range(1, 41):
        cb.on_step_begin(None, state, None)  # the steps done before this one
        clock.t += 2
        state.global_step = step
        if step % 20 == 0:
            cb.on_log(None, state, None, logs={"loss": 1.0 / step, "total_flos": 5.0})
    cb.on_train_end(None, state, None)
    assert lines == [
        "finetune: 0/40 steps (0.0%), 0s elapsed, ETA unknown",
        "finetune: 4/40 steps (10.0%), 8s elapsed, 2 s each, ETA 1m12s",  # the tenth mark, at step 5's start
        "finetune: 8/40 steps (20.0%), 16s elapsed, 2 s each, ETA 1m04s",
        "finetune: 12/40 steps (30.0%), 24s elapsed, 2 s each, ETA 56s",
        "finetune: 16/40 steps (40.0%), 32s elapsed, 2 s each, ETA 48s",
        "finetune: 20/40 steps (50.0%), 40s elapsed, 2 s each, ETA 40s | loss 0.05",
        "finetune: 24/40 steps (60.0%), 48s elapsed, 2 s each, ETA 32s",
        "finetune: 28/40 steps (70.0%), 56s elapsed, 2 s each, ETA 24s",
        "finetune: 32/40 steps (80.0%), 1m04s elapsed, 2 s each, ETA 16s",
        "finetune: 36/40 steps (90.0%), 1m12s elapsed, 2 s each, ETA 8s",
        "finetune: 40/40 steps (100.0%) done in 1m20s, 2 s each | loss 0.025",
    ]


def test_a_trainer_reports_to_the_log_and_prints_nothing(log, tmp_path, capsys):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    logger, lines = log
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    ids = torch.randint(0, 32, (8, 6))
    data = [{"input_ids": r, "labels": r} for r in ids]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=4,
        per_device_train_batch_size=2,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=LlamaForCausalLM(cfg), args=args, train_dataset=data)
    report_training(trainer, "tiny", logger)
    trainer.train()
    out = capsys.readouterr()
    assert "loss" not in out.out and "loss" not in out.err
    assert lines[0] == "tiny: 0/4 steps (0.0%), 0s elapsed, ETA unknown"
    logged = [line for line in lines if "| " in line]
    # two logging steps and the summary at the end, each with the steps done
    assert [line.split(" steps")[0] for line in logged] == ["tiny: 2/4", "tiny: 4/4", "tiny: 4/4"]
    assert "loss " in logged[0] and "train_runtime " in logged[2]


def test_vllm_bar_counts_what_vllm_reports(caplog):
    from shiftwork.inference.generation import vllm_bar

    caplog.set_level("INFO", logger="shiftwork")
    make = vllm_bar("generate")
    prompts = ["a", "b", "c"]
    assert make(prompts, desc="Rendering prompts") is prompts  # what vLLM wraps while preparing comes back as is
    # as vLLM's engine loop uses its bar: total, elapsed for its speeds, postfix, update per finished prompt
    bar = make(total=3, desc="Processed prompts", dynamic_ncols=True, postfix="")
    for _ in prompts:
        assert bar.format_dict["elapsed"] > 0
        bar.postfix = "est. speed"
        bar.update(1)
        if bar.n == 3:
            bar.refresh()
    bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" prompts")[0] for line in lines] == [
        "generate: 0/3",
        "generate: 1/3",
        "generate: 2/3",
        "generate: 3/3",
    ]
    assert lines[-1].startswith("generate: 3/3 prompts (100.0%) done in ")
