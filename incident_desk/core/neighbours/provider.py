"""A direct model provider for summarize_incident when the client cannot lend its model: the step between the
client's sampling and the raw log, and the way forward for clients of protocol eras that drop sampling.

Speaks the OpenAI chat-completions shape (which local Ollama, LM Studio and vLLM servers also speak) and the
Anthropic messages API. Every failure is a ``ProviderError`` whose message says what went wrong and never
contains the API key or request headers: these messages reach tool results and logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal
from urllib.parse import urlsplit

from incident_desk.core import errors
from incident_desk.core.neighbours import outside

OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

_MAX_DETAIL_CHARS = 200
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
# Key-shaped strings a provider might echo back in an error body, redacted even when they are not our key. The
# body is the provider's text: matched by RE2 (linear time), compiled on first use.
_KEYLIKE = r"(?i)\b(?:sk-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)"


class ProviderError(errors.Unavailable):
    """The provider gave no usable answer; the message names the failure, never a secret."""


@dataclass(frozen=True)
class ProviderConfig:
    """Which provider to call, how long to wait for its whole answer, and how much of it to read."""

    kind: Literal["openai", "anthropic"]
    model: str
    base_url: str | None
    timeout_seconds: float
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    @property
    def endpoint(self) -> str:
        if self.kind == "openai":
            return f"{(self.base_url or OPENAI_DEFAULT_BASE).rstrip('/')}/chat/completions"
        return f"{(self.base_url or ANTHROPIC_DEFAULT_BASE).rstrip('/')}/v1/messages"

    @property
    def where(self) -> str:
        """The endpoint for messages, without userinfo or query string (either may carry a credential)."""
        parts = urlsplit(self.endpoint)
        host = parts.hostname or "?"
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is not None:
            host = f"{host}:{port}"
        return f"{parts.scheme}://{host}{parts.path}"


@dataclass(frozen=True)
class ProviderAnswer:
    """The model's text and the model name the provider reports (or the configured one)."""

    text: str
    model: str


async def complete(
    config: ProviderConfig,
    api_key: str | None,
    *,
    system: str,
    user: str,
    max_tokens: int,
    temperature: float,
) -> ProviderAnswer:
    """One system + user exchange with the provider; raises ProviderError on any failure.

    The exchange goes through :mod:`core.outside`: ``timeout_seconds`` bounds the whole of it (not each read), at
    most ``max_response_bytes`` of the answer are read, and the answer is parsed in that worker thread too.
    """
    if config.kind == "anthropic" and not api_key:
        raise ProviderError(_prefix(config) + "needs an API key and none is configured")
    payload, headers = _request(
        config, api_key, system=system, user=user, max_tokens=max_tokens, temperature=temperature
    )
    request = outside.Request(
        "POST",
        config.endpoint,
        what=_prefix(config).removesuffix(": "),
        deadline_seconds=config.timeout_seconds,
        max_bytes=config.max_response_bytes,
        headers=headers,
        json_body=payload,
    )

    def answer(response: outside.Response) -> ProviderAnswer:
        return _parse(config, api_key, response)

    try:
        return await outside.exchange_from_loop(request, answer)
    except outside.OutsideError as exc:
        raise ProviderError(_prefix(config) + _failure(exc, api_key)) from None


def _request(
    config: ProviderConfig,
    api_key: str | None,
    *,
    system: str,
    user: str,
    max_tokens: int,
    temperature: float,
) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {"accept": "application/json"}
    if config.kind == "openai":
        payload: dict[str, Any] = {
            "model": config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return payload, headers
    payload = {
        "model": config.model,
        "system": system,
        "messages": [{"role": "user", "content": user}],
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    headers["x-api-key"] = api_key or ""
    headers["anthropic-version"] = ANTHROPIC_VERSION
    return payload, headers


def _failure(exc: outside.OutsideError, api_key: str | None) -> str:
    """Why the exchange failed, in the provider's words; exception texts are redacted."""
    if isinstance(exc, outside.DeadlineExceeded):
        return f"timed out after {exc.deadline_seconds:g}s"
    if isinstance(exc, outside.BadURL):
        return "the provider base URL is not a valid URL"
    if isinstance(exc, outside.Unreachable):
        return _redact(exc.reason, api_key) if exc.connect else f"request failed: {_redact(exc.reason, api_key)}"
    return _redact(exc.detail, api_key)


def _parse(config: ProviderConfig, api_key: str | None, response: outside.Response) -> ProviderAnswer:
    prefix = _prefix(config)
    if not response.is_success:
        message = f"HTTP {response.status_code}"
        if response.reason_phrase:
            message += f" {response.reason_phrase}"
        detail = _error_detail(response, api_key)
        raise ProviderError(prefix + message + (f": {detail}" if detail else ""))
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        raise ProviderError(prefix + "answer was not valid JSON") from None
    text = _openai_text(body) if config.kind == "openai" else _anthropic_text(body)
    if not text or not text.strip():
        raise ProviderError(prefix + "answer had no text")
    model = body.get("model") if isinstance(body, dict) else None
    # An answer that quotes the key it was called with (a model asked to, or an echoing proxy) never shows it.
    text = text.replace(api_key, "[REDACTED]") if api_key else text
    return ProviderAnswer(text=text.strip(), model=model if isinstance(model, str) and model else config.model)


def _openai_text(body: Any) -> str | None:
    """``choices[0].message.content``, which some compatible servers send as a list of text parts."""
    if not isinstance(body, dict):
        return None
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _join_text_blocks(content)
    return None


def _anthropic_text(body: Any) -> str | None:
    """The concatenated ``text`` blocks of ``content``; tool-use and thinking blocks are not an answer."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        return None
    return _join_text_blocks(body["content"])


def _join_text_blocks(blocks: list[Any]) -> str:
    return "".join(
        block["text"]
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def _error_detail(response: outside.Response, api_key: str | None) -> str:
    """The provider's short error message from a JSON error body; other bodies are not echoed."""
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
    elif isinstance(error, str):
        message = error
    else:
        message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        return ""
    message = _redact(" ".join(message.split()), api_key)
    if len(message) > _MAX_DETAIL_CHARS:
        message = message[: _MAX_DETAIL_CHARS - 1] + "…"
    return message


def _redact(text: str, api_key: str | None) -> str:
    if api_key:
        text = text.replace(api_key, "[redacted]")
    redacted: str = _keylike().sub("[redacted]", text)
    return redacted


@cache
def _keylike() -> Any:
    import re2

    return re2.compile(_KEYLIKE)


def _prefix(config: ProviderConfig) -> str:
    return f"{config.kind} provider at {config.where}: "


__all__ = ["ProviderAnswer", "ProviderConfig", "ProviderError", "complete"]
