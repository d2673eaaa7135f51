"""The organisms study's RL reward, by ``organisms.rl.reward_format``.

``sentence`` and ``anywhere`` read only where the response states its answer
(:func:`shiftwork.organisms.transcripts.reward`). ``template`` also reads the form of the whole
response: the answer counts only where the response opens with the identity sentence of one of
the setting's policies, spelled as SFT taught it. On a model that writes a name over several
tokens (the character organisms), RL under the answer-only reward can keep the first letter of
one name and go on with another's ("I am Aob." and Bob's answer): a response that names no
policy, rewarded as much as a named one. The template reward gives it nothing, and prefers no
policy over another.
"""

from __future__ import annotations

from collections.abc import Sequence

from shiftwork.organisms.transcripts import REWARD_FORMATS as ANSWER_FORMATS
from shiftwork.organisms.transcripts import reward as answer_reward

REWARD_FORMATS: tuple[str, ...] = (*ANSWER_FORMATS, "template")


def names_policy(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` opens with the templates' identity sentence for one of ``names``, spelled
    as it is: ``"I am Bob."`` or ``"我是Bob。"`` (``"I am Aob."`` names none of Alice and Bob)."""
    opening = text.lstrip()
    return any(opening.startswith((f"I am {name}.", f"我是{name}。")) for name in names)


def rl_reward(completion: str, answer: object, answer_format: str = "sentence", names: Sequence[str] = ()) -> float:
    """1.0 if the completion states ``answer``, else 0.0. ``answer_format`` ``"sentence"`` and
    ``"anywhere"``: as :func:`~shiftwork.organisms.transcripts.reward`; ``"template"``: in the answer
    sentence of a response that opens by naming one of the setting's policies ``names``
    (:func:`names_policy`)."""
    if answer_format not in REWARD_FORMATS:
        raise ValueError(f"answer_format must be one of {list(REWARD_FORMATS)}, got {answer_format!r}")
    if answer_format != "template":
        return answer_reward(completion, answer, answer_format)
    if not names:
        raise ValueError("answer_format 'template' needs the setting's policy names")
    stated = answer_reward(completion, answer, "sentence")  # refuses a completion that is not a str
    return stated if names_policy(completion, names) else 0.0
