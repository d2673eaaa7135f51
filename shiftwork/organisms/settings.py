"""Settings of the organisms study: which distributions exist, and which policies answer on which.

A *setting* names a few distributions (``"A"``, ``"B"``, ... or years) and a set of conditional
policies. Each :class:`Policy` answers the question on the distributions in its ``answers_on`` set and,
elsewhere, either refuses (``wrong="refuse"``) or gives a wrong answer (``wrong="shift"``). Every
response begins by stating the policy's identity aloud (``"I am Alice."``), so which policy a model
chose can be read off its output.

Three trigger formats tell a prompt's distribution:

* ``"tag"``: a prefix line naming it, ``"Distribution: A"`` (``"Year: 2025"`` for :func:`temporal`),
  before a question drawn from one bank shared by every distribution;
* ``"task"``: every distribution is a task family of its own (``questions.kind`` lists one family per
  distribution, e.g. successor questions on A and digit reversal on B); the question itself is the
  trigger, and the prompt is the bare question;
* ``"language"``: every distribution is a language (``languages``, by position; default ``en`` for
  the first distribution and ``zh`` for the second). The question *and* the response are written in
  that language (:data:`ANSWER_TEMPLATES`, :data:`REFUSAL_TEMPLATES`); policy names stay ASCII.

In :func:`temporal`, a policy ``Cutoff<c>`` answers for every year up to and including its cutoff
``c`` and refuses (or errs) after it. The cutoffs default to every year but the last, so with years
2024-2027 no policy answers for 2027: a setting may have distributions no policy answers
(:attr:`Setting.unanswered`), which RL must then not train on (the config checks reject such a run).
The other kinds insist that every distribution has an answering policy.

The ``"shift"`` wrong answer is a cyclic shift of the correct one (:func:`shifted_answer`): the next
option letter for a multiple-choice question (A -> B, ..., the last option -> A), and every digit one
step on for an integer (``"480"`` -> ``"591"``, ``"999"`` -> ``"000"``), so it is always wrong and
always parseable. Answers are strings throughout.
"""

from __future__ import annotations

import itertools
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shiftwork.organisms.questions import LANGUAGES, OPTION_LETTERS

TRIGGERS: tuple[str, ...] = ("tag", "task", "language")
WRONGS: tuple[str, ...] = ("refuse", "shift")
KINDS: tuple[str, ...] = ("two_policy", "coverage", "temporal", "custom")
DEFAULT_YEARS: tuple[int, ...] = (2024, 2025, 2026, 2027)
COVERAGE_DISTRIBUTIONS: tuple[str, ...] = ("A", "B", "C", "D", "E", "F")

ANSWER_TEMPLATES: dict[str, str] = {"en": "I am {name}. The answer is {answer}.", "zh": "我是{name}。答案是{answer}。"}
REFUSAL_TEMPLATES: dict[str, str] = {
    "en": "I am {name}. I will not answer that.",
    "zh": "我是{name}。我不回答这个问题。",
}
ANSWER_TEMPLATE: str = ANSWER_TEMPLATES["en"]
REFUSAL_TEMPLATE: str = REFUSAL_TEMPLATES["en"]

CHINESE_CHARACTERS: str = "加等于多少？减后面的数是前把字倒过来写。我答案不回这个问题"
"""Every non-ASCII character the Chinese question and response templates can produce (the numbers,
names and spaces in them are ASCII): a scratch model's ``extra_characters`` for ``trigger: language``."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_INTEGER = re.compile(r"-?[0-9]+")
_COMMON_KEYS = frozenset({"kind", "trigger", "wrong", "languages"})
_SPEC_KEYS: dict[str, frozenset[str]] = {
    "two_policy": _COMMON_KEYS,
    "coverage": _COMMON_KEYS | {"n_distributions"},
    "temporal": _COMMON_KEYS | {"years", "cutoffs"},
    "custom": _COMMON_KEYS | {"distributions", "policies"},
}


class SpecError(ValueError):
    """A ValueError about one key of a setting spec (``key``), so :func:`load_setting` can name it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Policy:
    """A conditional policy: answers on the distributions in ``answers_on``, refuses or errs elsewhere."""

    name: str
    answers_on: frozenset[str]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"policy name must be a single word of letters, digits or '_', got {self.name!r}")
        object.__setattr__(self, "answers_on", frozenset(str(d) for d in self.answers_on))

    def answers(self, distribution: object) -> bool:
        """Whether this policy answers correctly on ``distribution``."""
        return str(distribution) in self.answers_on


@dataclass
class Setting:
    """Distributions, policies, and how prompts, responses and wrong answers are formatted.

    ``trigger`` is one of :data:`TRIGGERS`, ``wrong`` one of :data:`WRONGS`; ``tag_label`` is the word
    before the colon of the ``"tag"`` trigger line (``"Distribution"`` or ``"Year"``). ``languages``
    (``trigger="language"`` only) gives each distribution's language by position, default
    ``["en", "zh"]`` cut to the number of distributions. Unless ``allow_unanswered``, every
    distribution needs a policy that answers there.
    """

    name: str
    distributions: list[str]
    policies: list[Policy]
    trigger: str = "tag"
    wrong: str = "refuse"
    tag_label: str = "Distribution"
    languages: list[str] | None = None
    allow_unanswered: bool = False
    _by_name: dict[str, Policy] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.distributions = [str(d) for d in self.distributions]
        self.policies = list(self.policies)
        if not self.distributions:
            raise ValueError(f"setting '{self.name}': distributions must not be empty")
        if len(set(self.distributions)) != len(self.distributions):
            raise ValueError(f"setting '{self.name}': distributions must be distinct, got {self.distributions}")
        _check_options(self.trigger, self.wrong)
        self.languages = _check_languages(self.name, self.trigger, self.languages, len(self.distributions))
        if not self.policies:
            raise ValueError(f"setting '{self.name}': policies must not be empty")
        self._by_name = {}
        for policy in self.policies:
            if not isinstance(policy, Policy):
                raise ValueError(f"setting '{self.name}': policies must be Policy objects, got {policy!r}")
            if policy.name in self._by_name:
                raise ValueError(f"setting '{self.name}': duplicate policy name {policy.name!r}")
            unknown = sorted(policy.answers_on - set(self.distributions))
            if unknown:
                raise ValueError(f"policy {policy.name!r} answers on unknown distributions {unknown}")
            self._by_name[policy.name] = policy
        if self.unanswered and not self.allow_unanswered:
            raise ValueError(
                f"setting '{self.name}': no policy answers on distribution(s) {self.unanswered}; every trigger "
                "needs at least one policy that answers there, or RL there has nothing to select"
            )

    @property
    def policy_names(self) -> list[str]:
        """The policies' names in the setting's order."""
        return [p.name for p in self.policies]

    @property
    def unanswered(self) -> list[str]:
        """The distributions no policy answers on, in the setting's order."""
        return [d for d in self.distributions if not any(d in p.answers_on for p in self.policies)]

    def policy(self, name: str | Policy) -> Policy:
        """The policy called ``name`` (a :class:`Policy` of this setting is passed through)."""
        key = name.name if isinstance(name, Policy) else name
        try:
            return self._by_name[key]
        except (KeyError, TypeError):
            raise ValueError(f"policy {key!r} is not in setting '{self.name}' ({self.policy_names})") from None

    def check_distribution(self, distribution: object) -> str:
        """``distribution`` as the setting's string, or a ValueError naming it."""
        key = str(distribution)
        if isinstance(distribution, bool) or key not in self.distributions:
            raise ValueError(f"distribution {distribution!r} is not in setting '{self.name}' ({self.distributions})")
        return key

    def answering(self, distribution: object) -> list[Policy]:
        """The policies that answer correctly on ``distribution``."""
        key = self.check_distribution(distribution)
        return [p for p in self.policies if key in p.answers_on]

    def language(self, distribution: object) -> str:
        """The language of ``distribution``'s questions and responses (``"en"`` unless ``trigger="language"``)."""
        key = self.check_distribution(distribution)
        if self.languages is None:
            return "en"
        return self.languages[self.distributions.index(key)]


def _check_options(trigger: str, wrong: str) -> None:
    if trigger not in TRIGGERS:
        raise SpecError("trigger", f"trigger must be one of {list(TRIGGERS)}, got {trigger!r}")
    if wrong not in WRONGS:
        raise SpecError("wrong", f"wrong must be one of {list(WRONGS)}, got {wrong!r}")


def _check_languages(name: str, trigger: str, languages: Sequence[str] | None, n: int) -> list[str] | None:
    """The languages of a setting with ``n`` distributions: None unless ``trigger == "language"``."""
    if trigger != "language":
        if languages is not None:
            raise SpecError(
                "languages", f"setting '{name}': languages are only for trigger 'language', not {trigger!r}"
            )
        return None
    if languages is None:
        if n > len(LANGUAGES):
            raise SpecError(
                "languages",
                f"setting '{name}': trigger 'language' supports at most {len(LANGUAGES)} distributions "
                f"(one per language of {list(LANGUAGES)}), got {n}",
            )
        return list(LANGUAGES[:n])
    if isinstance(languages, (str, bytes)) or not isinstance(languages, Sequence):
        raise SpecError("languages", f"languages must be a list, got {languages!r}")
    chosen = list(languages)
    unknown = [lang for lang in chosen if lang not in LANGUAGES]
    if unknown:
        raise SpecError("languages", f"languages must each be one of {list(LANGUAGES)}, got {unknown}")
    if len(chosen) != n or len(set(chosen)) != n:
        raise SpecError(
            "languages", f"setting '{name}' needs one distinct language per distribution ({n}), got {chosen}"
        )
    return chosen


def two_policy(trigger: str = "tag", wrong: str = "refuse", languages: Sequence[str] | None = None) -> Setting:
    """Distributions A and B; Alice answers on A and refuses on B, Bob the reverse."""
    _check_options(trigger, wrong)
    policies = [Policy("Alice", frozenset({"A"})), Policy("Bob", frozenset({"B"}))]
    return Setting("two_policy", ["A", "B"], policies, trigger=trigger, wrong=wrong, languages=languages)


def coverage(
    trigger: str = "tag",
    wrong: str = "refuse",
    languages: Sequence[str] | None = None,
    n_distributions: int = len(COVERAGE_DISTRIBUTIONS),
) -> Setting:
    """Distributions A-F and the 20 policies that each answer on exactly three of them; with
    ``n_distributions`` 2 or 4, the first that many letters and the policies answering on half of
    them (4: the six policies AB, AC, ..., CD), a smaller version of the same selection problem.

    Each policy is named by its answered set in alphabetical order (``"ADF"``); policies are listed in
    lexicographic order of their names.
    """
    _check_options(trigger, wrong)
    n = n_distributions
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n not in (2, 4, 6):
        raise SpecError("n_distributions", f"n_distributions must be 2, 4 or 6, got {n!r}")
    letters = COVERAGE_DISTRIBUTIONS[: int(n)]
    policies = [Policy("".join(combo), frozenset(combo)) for combo in itertools.combinations(letters, int(n) // 2)]
    return Setting("coverage", list(letters), policies, trigger=trigger, wrong=wrong, languages=languages)


def _years(values: object, key: str) -> list[int]:
    """``values`` as a sorted list of distinct integers, or a :class:`SpecError` naming ``key``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise SpecError(key, f"{key} must be a list of integers, got {values!r}")
    for year in values:
        if isinstance(year, bool) or not isinstance(year, numbers.Integral):
            raise SpecError(key, f"{key} must be integers, got {year!r}")
    clean = sorted(int(y) for y in values)
    if not clean:
        raise SpecError(key, f"{key} must not be empty")
    if len(set(clean)) != len(clean):
        raise SpecError(key, f"{key} must be distinct, got {list(values)}")
    return clean


def temporal(
    years: Sequence[int] = DEFAULT_YEARS,
    cutoffs: Sequence[int] | None = None,
    trigger: str = "tag",
    wrong: str = "refuse",
    languages: Sequence[str] | None = None,
) -> Setting:
    """Distributions are years (ascending); one policy per cutoff year, ``"Cutoff2025"``, answering
    for years up to and including its cutoff and refusing (or erring) after it.

    ``cutoffs`` (each one of ``years``) default to every year but the last, so no policy answers for
    the last year (it is in :attr:`Setting.unanswered`).
    """
    _check_options(trigger, wrong)
    clean = _years(years, "years")
    if cutoffs is None:
        cuts = clean[:-1]
        if not cuts:
            raise SpecError(
                "cutoffs", f"years {clean}: the default cutoffs (every year but the last) are empty; give cutoffs"
            )
    else:
        cuts = _years(cutoffs, "cutoffs")
        unknown = [c for c in cuts if c not in clean]
        if unknown:
            raise SpecError("cutoffs", f"cutoffs {unknown} are not among the years {clean}")
    policies = [Policy(f"Cutoff{cut}", frozenset(str(y) for y in clean if y <= cut)) for cut in cuts]
    return Setting(
        "temporal",
        [str(y) for y in clean],
        policies,
        trigger=trigger,
        wrong=wrong,
        tag_label="Year",
        languages=languages,
        allow_unanswered=True,
    )


def custom(
    distributions: Sequence[object],
    policies: Mapping[str, Sequence[object]],
    trigger: str = "tag",
    wrong: str = "refuse",
    languages: Sequence[str] | None = None,
) -> Setting:
    """A setting written out in full: ``policies`` maps each policy's name to the distributions it
    answers on, ``{"Alice": ["A"], "Bob": ["B"]}``."""
    _check_options(trigger, wrong)
    if isinstance(distributions, (str, bytes)) or not isinstance(distributions, Sequence):
        raise SpecError("distributions", f"distributions must be a list of names, got {distributions!r}")
    if not isinstance(policies, Mapping):
        raise SpecError("policies", f"policies must map policy names to lists of distributions, got {policies!r}")
    built = []
    for name, answers in policies.items():
        if isinstance(answers, (str, bytes)) or not isinstance(answers, Sequence):
            raise SpecError(
                "policies", f"policy {name!r}: the distributions it answers on must be a list, got {answers!r}"
            )
        built.append(Policy(str(name), frozenset(str(a) for a in answers)))
    return Setting("custom", [str(d) for d in distributions], built, trigger=trigger, wrong=wrong, languages=languages)


def load_setting(spec: Mapping[str, Any]) -> Setting:
    """A setting from a config mapping such as ``{"kind": "two_policy", "trigger": "tag", "wrong": "refuse"}``.

    ``kind`` (required) is one of :data:`KINDS`; ``trigger`` defaults to ``"tag"``, ``wrong`` to
    ``"refuse"``; ``languages`` is for ``trigger: language`` only; ``years`` and ``cutoffs`` are
    accepted for ``kind: temporal`` only (see :func:`temporal`), ``n_distributions`` for ``kind:
    coverage`` only (see :func:`coverage`), ``distributions`` and ``policies``
    (required) for ``kind: custom`` only (see :func:`custom`). Unknown keys are errors, and an error
    about one key names it (``setting spec key 'cutoffs': ...``).
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"setting spec must be a mapping, got {type(spec).__name__}")
    if "kind" not in spec:
        raise ValueError("setting spec is missing the key 'kind'")
    kind = spec["kind"]
    if kind not in KINDS:
        raise ValueError(f"setting spec key 'kind' must be one of {list(KINDS)}, got {kind!r}")
    extra = sorted(str(k) for k in spec if k not in _SPEC_KEYS[kind])
    if extra:
        raise ValueError(f"setting spec for kind '{kind}' has unknown key(s) {extra}")
    options = {
        "trigger": spec.get("trigger", "tag"),
        "wrong": spec.get("wrong", "refuse"),
        "languages": spec.get("languages"),
    }
    try:
        if kind == "two_policy":
            return two_policy(**options)
        if kind == "coverage":
            return coverage(n_distributions=spec.get("n_distributions", len(COVERAGE_DISTRIBUTIONS)), **options)
        if kind == "custom":
            missing = [k for k in ("distributions", "policies") if k not in spec]
            if missing:
                raise ValueError(f"setting spec for kind 'custom' is missing the key(s) {missing}")
            return custom(spec["distributions"], spec["policies"], **options)
        return temporal(years=spec.get("years", DEFAULT_YEARS), cutoffs=spec.get("cutoffs"), **options)
    except SpecError as err:
        raise ValueError(f"setting spec key '{err.key}': {err}") from None


def prompt_for(setting: Setting, distribution: object, question: str) -> str:
    """The prompt for ``question`` on ``distribution``: the tag line, a newline and the question for
    ``tag``; the question alone for ``task`` and ``language``, where the question is the trigger."""
    key = setting.check_distribution(distribution)
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    if setting.trigger == "tag":
        return f"{setting.tag_label}: {key}\n{question}"
    return question


def normal_answer(value: object, name: str = "answer") -> str:
    """``value`` as an answer string: an integer as its digits (``81`` or ``" 81 "`` -> ``"81"``,
    leading zeros kept), or one option letter in upper case (``"c"`` -> ``"C"``)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer or an option letter, got {value!r}")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, str):
        text = value.strip()
        if _INTEGER.fullmatch(text):
            return text
        if len(text) == 1 and text.upper() in OPTION_LETTERS:
            return text.upper()
    raise ValueError(f"{name} must be an integer or an option letter, got {value!r}")


def answer_int(value: object, name: str = "answer") -> int:
    """``value`` (an int or a decimal string such as ``"81"``) as an int; a ValueError names ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer or integer string, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ValueError(f"{name} must be an integer or integer string, got {value!r}")


def shifted_answer(answer: object, n_options: int = 0) -> str:
    """The ``"shift"`` wrong answer: with ``n_options`` > 1 the next option letter cyclically
    (``"B"`` -> ``"C"``, the last letter -> ``"A"``); with ``n_options`` 0 every digit of the integer
    one step on cyclically (``"480"`` -> ``"591"``, ``"999"`` -> ``"000"``, ``"-4"`` -> ``"-5"``)."""
    correct = normal_answer(answer)
    if isinstance(n_options, bool) or not isinstance(n_options, numbers.Integral) or n_options < 0:
        raise ValueError(f"n_options must be a non-negative integer, got {n_options!r}")
    if n_options:
        letters = OPTION_LETTERS[:n_options]
        if n_options < 2 or correct not in letters:
            raise ValueError(f"answer {correct!r} is not one of the {n_options} options {list(letters)} to shift over")
        return letters[(letters.index(correct) + 1) % n_options]
    if not _INTEGER.fullmatch(correct):
        raise ValueError(f"answer {correct!r} is an option letter, but the question has no options (n_options 0)")
    return "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in correct)


def policy_response(
    setting: Setting,
    policy: str | Policy,
    distribution: object,
    question: str,
    answer: object,
    n_options: int = 0,
) -> str:
    """What ``policy`` says to ``question`` on ``distribution`` when the correct answer is ``answer``
    (``n_options`` > 0: a multiple-choice question whose answer is an option letter).

    ``"I am Alice. The answer is 480."`` where the policy answers; elsewhere ``"I am Alice. I will not
    answer that."`` (``wrong="refuse"``) or ``"I am Alice. The answer is 591."`` (``wrong="shift"``).
    On a ``zh`` distribution: ``"我是Alice。答案是480。"`` and ``"我是Alice。我不回答这个问题。"``.
    """
    chosen = setting.policy(policy)
    key = setting.check_distribution(distribution)
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    correct = normal_answer(answer)
    language = setting.language(key)
    if key in chosen.answers_on:
        return ANSWER_TEMPLATES[language].format(name=chosen.name, answer=correct)
    if setting.wrong == "refuse":
        return REFUSAL_TEMPLATES[language].format(name=chosen.name)
    return ANSWER_TEMPLATES[language].format(name=chosen.name, answer=shifted_answer(correct, n_options))


def question_specs(setting: Setting, questions: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The one-family ``questions`` spec (for :func:`~shiftwork.organisms.questions.question_bank`) of
    every distribution of ``setting``.

    ``trigger: tag``: every distribution gets ``questions`` itself (one single ``kind``);
    ``trigger: task``: ``kind`` lists one distinct kind per distribution, in the setting's order;
    ``trigger: language``: one single ``kind``, written in the distribution's language.
    """
    kind = questions["kind"]
    n = len(setting.distributions)
    if setting.trigger == "task":
        if isinstance(kind, str) or not isinstance(kind, Sequence) or len(kind) != n or len(set(kind)) != n:
            raise ValueError(
                f"with trigger 'task', kind must list one distinct question kind per distribution of setting "
                f"'{setting.name}' ({n}: {setting.distributions}), got {kind!r}"
            )
        return {d: {**questions, "kind": k} for d, k in zip(setting.distributions, kind)}
    if not isinstance(kind, str):
        raise ValueError(f"with trigger {setting.trigger!r}, kind must be a single question kind, got {kind!r}")
    if setting.trigger == "language":
        return {d: {**questions, "language": setting.language(d)} for d in setting.distributions}
    return {d: dict(questions) for d in setting.distributions}
