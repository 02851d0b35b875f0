"""Fault policy for provider calls: the error kinds, retries, a per-provider circuit breaker, a spend guard
and the fallback list. Pure logic with an injectable clock; the HTTP side lives in :mod:`.http`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from openclaw_ctx.errors import ProviderError, ProviderErrorKind

__all__ = [
    "NO_FALLBACK",
    "RETRYABLE",
    "TRIPS_BREAKER",
    "CircuitBreaker",
    "ProviderError",
    "ProviderErrorKind",
    "RetryPolicy",
    "SpendGuard",
    "first_available",
]

T = TypeVar("T")
C = TypeVar("C")

RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server", "connection", "malformed"})
# Failures that say something about the provider's health. Auth is not among them: it is not transient,
# a breaker would only turn a clear "bad key" into a vague "unavailable", and it is never retried anyway.
TRIPS_BREAKER: frozenset[str] = frozenset({"rate_limit", "server", "connection", "timeout", "malformed"})
# Failures the next provider in a fallback list cannot fix: the request itself, or the caller's budget.
NO_FALLBACK: frozenset[str] = frozenset({"bad_request", "context_overflow", "spend_limit"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a call is retried."""

    max_attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.25
    """Each backoff is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    max_retry_after_s: float = 60.0
    """A Retry-After longer than this is not waited for: the call fails (and falls back) at once."""

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based), or None to give up."""
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after_s else None
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return max(0.0, backoff * (1 + rng.uniform(-self.jitter, self.jitter)))


class CircuitBreaker:
    """Per-provider breaker: opens after `threshold` consecutive failed calls, half-opens after `cooldown_s`.

    Half-open lets exactly one probe call through; its success closes the breaker, its failure re-opens it.
    """

    def __init__(
        self,
        provider: str,
        *,
        threshold: int = 5,
        cooldown_s: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> Literal["closed", "open", "half_open"]:
        """The breaker's state now."""
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self.cooldown_s else "open"

    def before_call(self) -> None:
        """Admit a call, or raise ProviderError(kind="circuit_open") without touching the network."""
        state = self.state
        if state == "closed":
            return
        if state == "half_open" and not self._probing:
            self._probing = True
            return
        assert self._opened_at is not None
        wait = max(0.0, self.cooldown_s - (self._clock() - self._opened_at))
        raise ProviderError(
            f"{self.provider}: circuit open after {self._failures} consecutive failures (next try in {wait:.0f}s)",
            kind="circuit_open",
            provider=self.provider,
        )

    def record(self, outcome: Literal["success", "failure", "neutral"]) -> None:
        """Report how an admitted call ended; "neutral" (e.g. a bad request) says nothing about health."""
        probing, self._probing = self._probing, False
        if outcome == "success":
            self._failures, self._opened_at = 0, None
        elif outcome == "failure":
            self._failures += 1
            if probing or self._failures >= self.threshold:
                self._opened_at = self._clock()


class SpendGuard:
    """At most `max_calls` answered calls per `window_s` per session key; past that, refuse for `backoff_s`.

    Only calls a provider answered are counted (a failed attempt is not billed, and the circuit breaker
    bounds those), so a fallback after a failure does not count twice. Share one guard between a provider
    and its fallbacks so that falling back cannot bypass the budget.
    """

    def __init__(
        self,
        *,
        max_calls: int = 24,
        window_s: float = 600.0,
        backoff_s: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_calls = max_calls
        self.window_s = window_s
        self.backoff_s = backoff_s
        self._clock = clock
        self._calls: dict[str, list[float]] = {}
        self._blocked_until: dict[str, float] = {}

    def admit(self, session_key: str | None, provider: str) -> None:
        """Let a call for `session_key` go ahead, or raise ProviderError(kind="spend_limit")."""
        key = session_key or "*"
        now = self._clock()
        until = self._blocked_until.get(key)
        if until is not None and now < until:
            raise ProviderError(
                f"{provider}: spend guard: session {key!r} is backing off for {until - now:.0f}s more",
                kind="spend_limit",
                provider=provider,
            )
        recent = [t for t in self._calls.get(key, []) if now - t < self.window_s]
        self._calls[key] = recent
        if len(recent) >= self.max_calls:
            self._blocked_until[key] = now + self.backoff_s
            raise ProviderError(
                f"{provider}: spend guard: {len(recent)} calls in {self.window_s:.0f}s for session {key!r} "
                f"(limit {self.max_calls}); backing off {self.backoff_s:.0f}s",
                kind="spend_limit",
                provider=provider,
            )

    def record(self, session_key: str | None) -> None:
        """Count one answered call for `session_key`."""
        self._calls.setdefault(session_key or "*", []).append(self._clock())

    def reset(self, session_key: str | None) -> None:
        """Clear the count and the backoff of `session_key` (a manual or forced compaction does this)."""
        key = session_key or "*"
        self._calls.pop(key, None)
        self._blocked_until.pop(key, None)


async def first_available(candidates: Sequence[C], call: Callable[[C], Awaitable[T]]) -> tuple[C, T]:
    """Try `call` on each candidate in order; return the first that answers, with its answer.

    A failure the next candidate cannot fix (bad request, context overflow, spend limit) stops at once.
    When every candidate fails, the first candidate's error kind is raised, with all errors in `attempts`.

    Raises:
        ProviderError: as described.
        ValueError: `candidates` is empty.
    """
    if not candidates:
        raise ValueError("first_available needs at least one candidate")
    errors: list[ProviderError] = []
    for candidate in candidates:
        try:
            return candidate, await call(candidate)
        except ProviderError as err:
            errors.append(err)
            if err.kind in NO_FALLBACK:
                break
    if len(errors) == 1:
        raise errors[0]
    first = errors[0]
    raise ProviderError(
        f"all {len(errors)} providers failed: " + "; then ".join(e.detail for e in errors),
        kind=first.kind,
        provider=first.provider,
        status=first.status,
        attempts=errors,
    ) from first
