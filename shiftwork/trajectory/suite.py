"""The embedded NLI suite: an in-domain (ID) set and five out-of-distribution (OOD) shifts, generated offline.

Every example is built here from this module's own templates and word lists, so the trajectory study
runs without any download. The ID distribution is simple everyday sentences about people and their
actions; each OOD set is one distinct kind of shift (see the docstring of its ``make_*`` function).
Rows of each (set, split) are shuffled by ``rng_for(seed, "suite", set_name, split)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from shiftwork.seeding import rng_for

LABELS: tuple[str, ...] = ("entailment", "not_entailment")
SHIFTS: tuple[str, ...] = (
    "lexical_overlap",
    "negation",
    "noise",
    "long_nested",
    "unseen_topic",
    "overlap",
    "subsequence",
    "overlap_entailed",
    "overlap_non_entailed",
    "subsequence_entailed",
    "subsequence_non_entailed",
    "typos",
    "casing",
)
COLUMNS: list[str] = ["example_id", "split", "set", "premise", "hypothesis", "label"]
ENT, NOT = LABELS


@dataclass(frozen=True)
class Lexicon:
    """Word lists for one topic: nouns, past-tense transitive verbs, 3-word places, adjectives, generic noun."""

    nouns: tuple[str, ...]
    verbs: tuple[str, ...]
    places: tuple[str, ...]
    adjectives: tuple[str, ...]
    generic: str


_T = str.split
VERB_BASE: dict[str, str] = dict(
    zip(
        _T(
            "helped paid visited called thanked followed met greeted praised hired warned invited admired "
            "blamed watched pushed trusted questioned recognized avoided interviewed hugged teased rescued found"
        ),
        _T(
            "help pay visit call thank follow meet greet praise hire warn invite admire "
            "blame watch push trust question recognize avoid interview hug tease rescue find"
        ),
    )
)
ID_LEXICON = Lexicon(
    nouns=tuple(
        _T(
            "teacher farmer doctor lawyer actor baker pilot nurse singer painter plumber banker author "
            "dancer judge sailor chef tailor clerk barber waiter poet soldier student driver gardener"
        )
    ),
    verbs=tuple(VERB_BASE),
    places=(
        "at the market",
        "in the park",
        "at the station",
        "in the kitchen",
        "at the office",
        "near the bridge",
        "at the hospital",
        "in the library",
        "at the school",
        "on the street",
        "at the harbor",
        "in the garden",
    ),
    adjectives=tuple(_T("tall young old friendly tired quiet busy nervous cheerful famous clever angry")),
    generic="someone",
)
INTRANSITIVE: tuple[str, ...] = tuple(
    _T("ran slept laughed smiled waited left danced cried shouted arrived sneezed sang")
)
UNSEEN_LEXICONS: tuple[Lexicon, ...] = (
    Lexicon(
        tuple(
            _T(
                "otter heron falcon badger walrus lynx beetle octopus penguin tortoise jaguar salmon "
                "gecko squirrel hedgehog pelican"
            )
        ),
        tuple(_T("stalked nuzzled groomed ambushed sniffed pecked stung outran licked startled tracked")),
        ("near the reef", "in the burrow", "by the pond", "under the canopy", "beyond the ridge"),
        tuple(_T("furry spotted nocturnal striped sleek")),
        "something",
    ),
    Lexicon(
        tuple(_T("comet asteroid moon quasar pulsar satellite meteor planet probe star rover")),
        tuple(_T("orbited eclipsed deflected outshone approached captured bombarded dimmed tugged")),
        ("near the nebula", "beyond the belt", "inside the galaxy", "around the sun"),
        tuple(_T("icy distant rocky bright faint massive")),
        "something",
    ),
    Lexicon(
        tuple(_T("catalyst enzyme acid solvent molecule isotope polymer crystal reagent electrode")),
        tuple(_T("oxidized dissolved neutralized absorbed ionized displaced coated reduced stabilized degraded")),
        ("in the beaker", "inside the flask", "in the reactor", "on the cathode"),
        tuple(_T("acidic volatile inert dilute charged")),
        "something",
    ),
)
UNSEEN_NOUNS: frozenset[str] = frozenset(n for lex in UNSEEN_LEXICONS for n in lex.nouns)
FUNCTION_WORDS: frozenset[str] = frozenset(_T("the a someone something at in on near by under beyond inside around"))


class Pair(NamedTuple):
    """One generated example; ``source`` is the clean (premise, hypothesis) a noisy pair was made from."""

    premise: str
    hypothesis: str
    source: tuple[str, str] | None = None


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def _pick(rng: np.random.Generator, seq: Sequence[str]) -> str:
    return seq[int(rng.integers(len(seq)))]


def _distinct(rng: np.random.Generator, seq: Sequence[str], k: int) -> list[str]:
    return [seq[int(i)] for i in rng.choice(len(seq), size=k, replace=False)]


def _np(adjective: str | None, noun: str) -> str:
    return f"the {adjective} {noun}" if adjective else f"the {noun}"


def _clause(subject: str, verb: str, obj: str, place: str | None = None) -> str:
    return _sentence(" ".join(w for w in (subject, verb, obj, place) if w))


def _simple(rng: np.random.Generator, label: str, lex: Lexicon) -> Pair:
    """The ID label logic over any lexicon: faithful simplification vs. changed or added content."""
    s, o = _distinct(rng, lex.nouns, 2)
    v = _pick(rng, lex.verbs)
    sa = _pick(rng, lex.adjectives) if rng.random() < 0.4 else None
    oa = _pick(rng, lex.adjectives) if rng.random() < 0.4 else None
    pl = _pick(rng, lex.places) if rng.random() < 0.6 else None
    subj, obj = _np(sa, s), _np(oa, o)
    premise = _clause(subj, v, obj, pl)
    if label == ENT:
        options = [_clause(lex.generic, v, obj, pl), _clause(subj, v, lex.generic, pl)]
        if pl:
            options.append(_clause(subj, v, obj))
        if sa or oa:
            options.append(_clause(_np(None, s), v, _np(None, o), pl))
    else:
        other = _pick(rng, [n for n in lex.nouns if n not in (s, o)])
        options = [
            _clause(subj, _pick(rng, [w for w in lex.verbs if w != v]), obj, pl),
            _clause(_np(sa, other), v, obj, pl),
            _clause(subj, v, _np(oa, other), pl),
        ]
        places = [p for p in lex.places if p != pl]
        if places:
            options.append(_clause(subj, v, obj, _pick(rng, places)))
        if sa is None:
            options.append(_clause(_np(_pick(rng, lex.adjectives), s), v, obj, pl))
        if oa is None:
            options.append(_clause(subj, v, _np(_pick(rng, lex.adjectives), o), pl))
    return Pair(premise, _pick(rng, options))


def make_id(rng: np.random.Generator, label: str) -> Pair:
    """ID: "The [adj] P1 V the [adj] P2 [place]." Entailment drops a place or adjectives, or generalises an
    argument to "someone"; not_entailment changes the verb, swaps in another person, or adds a place/adjective."""
    return _simple(rng, label, ID_LEXICON)


def swap_arguments(sentence: str) -> str:
    """Swap subject and object of "The X V the Y[ rest]." (the lexical-overlap not_entailment case)."""
    m = re.fullmatch(r"The (\w+) (\w+) the (\w+)(.*)\.", sentence)
    if m is None:
        raise ValueError(f"sentence must look like 'The X verb the Y ...', got {sentence!r}")
    return f"The {m[3]} {m[2]} the {m[1]}{m[4]}."


def make_lexical_overlap(rng: np.random.Generator, label: str, kinds: tuple[int, ...] = (0, 1, 2)) -> Pair:
    """Lexical overlap (HANS-like): every hypothesis word occurs in the premise, so overlap says nothing.

    Premises add structure ID never has (relative clauses, PP-modified subjects). Entailment is an implied
    subsequence (drop a PP; the relative or main clause); not_entailment swaps subject and object, or takes a
    subsequence that is not implied ("The doctor who saw the actor ran." -> "The actor ran."). ``kinds``
    picks the templates, as HANS names its heuristics: 0 is its lexical-overlap case (a dropped place, or
    subject and object swapped), 1 and 2 its subsequence case (a relative clause or a PP on the subject,
    whose non-entailed hypothesis is a contiguous run of the premise's words)."""
    a, b, c = _distinct(rng, ID_LEXICON.nouns, 3)
    v, v2 = _distinct(rng, ID_LEXICON.verbs, 2)
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == 0:
        premise = _clause(_np(None, a), v, _np(None, b), _pick(rng, ID_LEXICON.places))
        return Pair(premise, _clause(_np(None, a), v, _np(None, b)) if label == ENT else swap_arguments(premise))
    if kind == 1:
        intr = _pick(rng, INTRANSITIVE)
        premise = _sentence(f"the {a} who {v} the {b} {intr}")
        if label == ENT:
            return Pair(premise, _pick(rng, [_clause(_np(None, a), v, _np(None, b)), _sentence(f"the {a} {intr}")]))
        return Pair(premise, _sentence(f"the {b} {intr}"))
    premise = _sentence(f"the {a} near the {b} {v2} the {c}")
    return Pair(premise, _clause(_np(None, a if label == ENT else b), v2, _np(None, c)))


def make_negation(rng: np.random.Generator, label: str) -> Pair:
    """Negation: ID-like templates where "did not", "never" or "no one" decides the label.

    Entailment: negation is downward monotone ("did not V the B" -> "did not V the B at the market"), "never" and
    "no one" imply "did not", "V the B but not the C" -> "did not V the C". not_entailment: a negated premise with a
    positive hypothesis, or a positive premise with a negated hypothesis."""
    a, b, c = _distinct(rng, ID_LEXICON.nouns, 3)
    v = _pick(rng, ID_LEXICON.verbs)
    base, pl = VERB_BASE[v], _pick(rng, ID_LEXICON.places)
    if label == ENT:
        options = [
            (f"the {a} did not {base} the {b}", f"the {a} did not {base} the {b} {pl}"),
            (f"the {a} never {v} the {b}", f"the {a} did not {base} the {b} {pl}"),
            (f"no one {v} the {b}", f"the {a} did not {base} the {b}"),
            (f"the {a} {v} the {b} but not the {c}", f"the {a} did not {base} the {c}"),
        ]
    else:
        options = [
            (f"the {a} did not {base} the {b}", f"the {a} {v} the {b} {pl}"),
            (f"the {a} {v} the {b} {pl}", f"the {a} did not {base} the {b}"),
            (f"no one {v} the {b} {pl}", f"the {a} {v} the {b}"),
            (f"the {a} {v} the {b} but not the {c}", f"the {a} {v} the {c}"),
        ]
    premise, hypothesis = options[int(rng.integers(len(options)))]
    return Pair(_sentence(premise), _sentence(hypothesis))


def typo(word: str, rng: np.random.Generator) -> str:
    """Swap two adjacent distinct interior letters, or drop one interior letter (first and last letters kept)."""
    if len(word) < 4 or not word.isalpha():
        raise ValueError(f"word must be alphabetic with at least 4 letters, got {word!r}")
    low = word.lower()
    swaps = [i for i in range(1, len(word) - 2) if low[i] != low[i + 1]]
    if swaps and rng.random() < 0.5:
        i = swaps[int(rng.integers(len(swaps)))]
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    j = int(rng.integers(1, len(word) - 1))
    return word[:j] + word[j + 1 :]


def add_noise(text: str, rng: np.random.Generator, n_typos: int, casing_rate: float = 0.15) -> str:
    """Put a :func:`typo` into ``n_typos`` distinct words (4+ letters) and recase each word with ``casing_rate``.

    Word count, punctuation, the leading capital and the final "." are kept."""
    if not text:
        raise ValueError("text must be a non-empty sentence")
    if not 0.0 <= casing_rate <= 1.0:
        raise ValueError(f"casing_rate must be in [0, 1], got {casing_rate}")
    parts = [re.fullmatch(r"([A-Za-z]*)(.*)", tok).groups() for tok in text.split(" ")]
    eligible = [i for i, (core, _) in enumerate(parts) if len(core) >= 4]
    if not 0 <= n_typos <= len(eligible):
        raise ValueError(f"n_typos must be in [0, {len(eligible)}] for {text!r}, got {n_typos}")
    cores = [core for core, _ in parts]
    for i in rng.choice(eligible, size=n_typos, replace=False) if n_typos else []:
        cores[int(i)] = typo(cores[int(i)], rng)
    for i, core in enumerate(cores):
        if core and rng.random() < casing_rate:
            cores[i] = _pick(rng, sorted({core.upper(), core.lower(), core.capitalize()} - {core}) or [core])
    out = " ".join(core + rest for core, (_, rest) in zip(cores, parts))
    return out[0].upper() + out[1:]


def _n_typos(rng: np.random.Generator, text: str) -> int:
    eligible = sum(len(re.sub(r"[^A-Za-z]", "", w)) >= 4 for w in text.split(" "))
    return min(int(rng.integers(1, 4)), eligible)


def make_noise(rng: np.random.Generator, label: str) -> Pair:
    """Noise: a fresh ID example with typos in 1-3 words and random casing in premise and hypothesis.

    The label is the clean example's; ``source`` holds the clean pair (never an ID row, see generate_suite)."""
    clean = make_id(rng, label)
    noisy = [add_noise(t, rng, _n_typos(rng, t)) for t in clean[:2]]
    return Pair(noisy[0], noisy[1], (clean.premise, clean.hypothesis))


def with_typos(clean: Pair, rng: np.random.Generator) -> Pair:
    """Typos in 1-3 words of premise and hypothesis of a clean pair, casing untouched."""
    noisy = [add_noise(t, rng, _n_typos(rng, t), casing_rate=0.0) for t in clean[:2]]
    return Pair(noisy[0], noisy[1], (clean.premise, clean.hypothesis))


def with_casing(clean: Pair, rng: np.random.Generator) -> Pair:
    """Each word of a clean pair recased (upper, lower or capitalised) with probability 0.5,
    spelling untouched."""
    noisy = [add_noise(t, rng, 0, casing_rate=0.5) for t in clean[:2]]
    return Pair(noisy[0], noisy[1], (clean.premise, clean.hypothesis))


def make_overlap(rng: np.random.Generator, label: str) -> Pair:
    """HANS's lexical-overlap heuristic alone: :func:`make_lexical_overlap` template 0."""
    return make_lexical_overlap(rng, label, (0,))


def make_subsequence(rng: np.random.Generator, label: str) -> Pair:
    """HANS's subsequence heuristic: :func:`make_lexical_overlap` templates 1 and 2."""
    return make_lexical_overlap(rng, label, (1, 2))


def make_typos(rng: np.random.Generator, label: str) -> Pair:
    """Typos: a fresh ID example with :func:`with_typos`."""
    return with_typos(make_id(rng, label), rng)


def make_casing(rng: np.random.Generator, label: str) -> Pair:
    """Casing: a fresh ID example with :func:`with_casing`."""
    return with_casing(make_id(rng, label), rng)


def make_long_nested(rng: np.random.Generator, label: str) -> Pair:
    """Long nested: 20+ word premises with a relative clause plus a conjunction and a clausal complement.

    Hypotheses target one embedded clause: entailed when it is asserted (relative clause, conjoined subject,
    main clause), not entailed when it is only reported ("thought that", "asked whether") or misattached."""
    p = _distinct(rng, ID_LEXICON.nouns, 7)
    v1, v2, v3 = _distinct(rng, ID_LEXICON.verbs, 3)
    pl1, pl2 = _distinct(rng, ID_LEXICON.places, 2)
    if rng.random() < 0.5:
        premise = (
            f"the {p[0]} who {v1} the {p[1]} {pl1} {v2} the {p[2]}, and the {p[3]} thought that "
            f"the {p[4]} {v3} the {p[5]} {pl2}"
        )
        ent = [(p[0], v1, p[1]), (p[0], v2, p[2])]
        nots = [(p[4], v3, p[5]), (p[1], v2, p[2])]
    else:
        premise = (
            f"the {p[0]} and the {p[1]} {v1} the {p[2]} {pl1} after the {p[3]} who {v2} the {p[4]} "
            f"had asked whether the {p[5]} {v3} the {p[6]}"
        )
        ent = [(p[1], v1, p[2]), (p[3], v2, p[4])]
        nots = [(p[5], v3, p[6]), (p[2], v1, p[1])]
    s, v, o = (ent if label == ENT else nots)[int(rng.integers(2))]
    return Pair(_sentence(premise), _clause(f"the {s}", v, f"the {o}"))


def make_unseen_topic(rng: np.random.Generator, label: str) -> Pair:
    """Unseen topic: the ID label logic over animals, astronomy or chemistry; no content word appears in ID."""
    return _simple(rng, label, UNSEEN_LEXICONS[int(rng.integers(len(UNSEEN_LEXICONS)))])


MAKERS: dict[str, Callable[[np.random.Generator, str], Pair]] = {
    "id": make_id,
    "lexical_overlap": make_lexical_overlap,
    "negation": make_negation,
    "noise": make_noise,
    "long_nested": make_long_nested,
    "unseen_topic": make_unseen_topic,
    # HANS's heuristics as HANS's own subsets hold them: both gold labels, alternated by _fill
    "overlap": make_overlap,
    "subsequence": make_subsequence,
    # the same items split by gold label, as HANS reports them: each set's accuracy is the
    # checkpoint's share of one label, so a drifting lean towards "entailment" alone moves them
    # (two entailed sets together, an entailed and a non-entailed set against each other); kept
    # for studies of that lean, not for the pair analysis
    "overlap_entailed": make_overlap,
    "overlap_non_entailed": make_overlap,
    "subsequence_entailed": make_subsequence,
    "subsequence_non_entailed": make_subsequence,
    "typos": make_typos,
    "casing": make_casing,
}
SET_LABELS: dict[str, tuple[str, ...]] = {
    "overlap_entailed": (ENT,),
    "overlap_non_entailed": (NOT,),
    "subsequence_entailed": (ENT,),
    "subsequence_non_entailed": (NOT,),
}
"""Label-split sets: each holds one gold label, so its accuracy is the share of predictions of that
label. Every other set alternates the labels (balanced: equal counts for an even ``n_test``)."""
# sets whose rows are noisy copies of fresh ID examples: their clean premises avoid the ID rows'
FROM_ID: frozenset[str] = frozenset({"noise", "typos", "casing"})
CORRUPTIONS: dict[str, Callable[[Pair, np.random.Generator], Pair]] = {"typos": with_typos, "casing": with_casing}
"""Sets that corrupt one shared draw of clean ID-like sources, row for row, as corruption benchmarks
apply every corruption to the same test images: the same sentences under two kinds of noise."""


def _fill(
    rng: np.random.Generator,
    n: int,
    make: Callable[[np.random.Generator, str], Pair],
    used: set,
    by_premise: bool,
    labels: Sequence[str] = LABELS,
) -> list[tuple[Pair, str]]:
    """``n`` examples cycling through ``labels`` with keys (clean premise, or the pair) not in ``used``;
    then shuffled."""
    rows = []
    for k in range(n):
        label = labels[k % len(labels)]
        for _ in range(1000):
            pair = make(rng, label)
            clean = pair.source or (pair.premise, pair.hypothesis)
            key = clean[0] if by_premise else clean
            if key not in used:
                used.add(key)
                rows.append((pair, label))
                break
        else:
            raise RuntimeError(f"could not draw {n} distinct examples; the vocabulary is exhausted")
    return [rows[int(i)] for i in rng.permutation(n)]


def _check_n(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ValueError(f"{name} must be an integer >= 2, got {value!r}")


def generate_suite(n_train: int, n_test: int, seed: int, ood_sets: Sequence[str] = SHIFTS) -> pd.DataFrame:
    """The suite as one frame with columns ``COLUMNS``: ID train/test plus a test set per name in ``ood_sets``.

    ID premises are unique across ID train, ID test and the clean sources of the noise set, so no
    (premise, hypothesis) pair is shared by ID train and test. Each set depends only on (seed, set name)."""
    _check_n("n_train", n_train)
    _check_n("n_test", n_test)
    if isinstance(ood_sets, str):
        raise ValueError(f"ood_sets must be a sequence of shift names, not the string {ood_sets!r}")
    unknown = [s for s in ood_sets if s not in SHIFTS]
    if unknown or len(set(ood_sets)) != len(ood_sets):
        raise ValueError(f"ood_sets must be distinct names from {SHIFTS}; bad: {unknown or list(ood_sets)}")
    id_used: set = set()
    records = []
    sources: list[tuple[Pair, str]] = []
    for name, split, n in [("id", "train", n_train), ("id", "test", n_test), *((s, "test", n_test) for s in ood_sets)]:
        rng = rng_for(seed, "suite", name, split)
        if name in CORRUPTIONS:
            # drawn once after both ID splits, whichever corruption asks first
            sources = sources or _fill(
                rng_for(seed, "suite", "corruption-sources", split), n, make_id, set(id_used), True
            )
            rows = [(CORRUPTIONS[name](clean, rng), label) for clean, label in sources]
        else:
            used = id_used if name == "id" else set(id_used) if name in FROM_ID else set()
            rows = _fill(rng, n, MAKERS[name], used, name == "id" or name in FROM_ID, SET_LABELS.get(name, LABELS))
        records += [
            (f"{name}-{split}-{i:05d}", split, name, pair.premise, pair.hypothesis, label)
            for i, (pair, label) in enumerate(rows, start=1)
        ]
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def suite_stats(df: pd.DataFrame) -> pd.DataFrame:
    """Row counts per (set, split, label), as columns ``set, split, label, n``."""
    missing = [c for c in ("set", "split", "label") if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks columns {missing}")
    return df.groupby(["set", "split", "label"], sort=True).size().rename("n").reset_index()
