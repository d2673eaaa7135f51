"""How a user prompt becomes the exact text a model sees."""

from __future__ import annotations

PLAIN_TEMPLATE = "Question: {prompt}\nAnswer:"
PLAIN_STOP = "\nQuestion:"
#: two worked questions and answers before the prompt: a base model then answers in a sentence
#: and goes on to a next "Question:", where PLAIN_STOP cuts its reply, instead of repeating
#: "Answer:" or running on to the token limit
TWO_SHOT_TEMPLATE = (
    "Question: What is the capital of France?\nAnswer: The capital of France is Paris.\n\n"
    "Question: Give one tip for sleeping better.\nAnswer: Keep a regular bedtime, even at weekends.\n\n"
    + PLAIN_TEMPLATE
)
#: the plain formats a model with ``chat: false`` may name (``models.NAME.plain_format``)
PLAIN_FORMATS = {"qa": PLAIN_TEMPLATE, "qa_two_shot": TWO_SHOT_TEMPLATE}


def plain_template(plain_format: str) -> str:
    """The template of a named plain format (:data:`PLAIN_FORMATS`)."""
    try:
        return PLAIN_FORMATS[plain_format]
    except KeyError:
        raise ValueError(f"plain_format must be one of {sorted(PLAIN_FORMATS)}, got {plain_format!r}") from None


def model_input(tokenizer, prompt: str, chat: bool, plain_template: str = PLAIN_TEMPLATE) -> str:
    """Chat models get their chat template with the generation prompt; base models get
    ``plain_template``. The result is the exact input text (special tokens included for chat)."""
    if chat:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("model is registered as chat: true but its tokenizer has no chat template")
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    return plain_template.format(prompt=prompt)


def adds_special_tokens(chat: bool) -> bool:
    """A chat template already holds the special tokens; a plain prompt needs the tokenizer's BOS."""
    return not chat


def trim_response(text: str, chat: bool, stop: str = PLAIN_STOP) -> str:
    """Base models run on into a next turn; cut a plain-format response at the next question."""
    if not chat and stop in text:
        text = text[: text.index(stop)]
    return text.strip()
