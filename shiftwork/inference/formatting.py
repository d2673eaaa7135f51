"""How a user prompt becomes the exact text a model sees."""

from __future__ import annotations

PLAIN_TEMPLATE = "Question: {prompt}\nAnswer:"
PLAIN_STOP = "\nQuestion:"


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
