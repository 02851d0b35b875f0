"""The base classes of every parameter and result object: camelCase on the wire, snake_case in Python.

Parameters follow the host's own filter (OpenClaw 2026.9 ``CONTEXT_ENGINE_HOST_PARAMS``): declared
keys are typed and validated; a key the contract does not declare never fails a call — it is ignored,
and its name kept in :attr:`WireParams.ignored_keys` for diagnostics. Which keys a caller actually
set matters (a strict engine may reject keys the host added), so it is tracked by pydantic's
``model_fields_set`` and :func:`without_keys` rebuilds a params object with some keys removed.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, PrivateAttr, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["WireParams", "WireResult", "without_keys"]


class WireParams(BaseModel):
    """A hook's parameter bag: frozen, validated, tolerant of keys a newer host adds."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    _ignored_keys: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _note_ignored_keys(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        params = handler(data)
        if isinstance(data, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            unknown = tuple(sorted(str(k) for k in data if k not in known))
            if unknown:
                params._ignored_keys = unknown
        return params

    @property
    def ignored_keys(self) -> tuple[str, ...]:
        """Keys the caller sent that this contract does not declare (ignored, not an error)."""
        return self._ignored_keys


class WireResult(BaseModel):
    """A hook's result: frozen; keys an engine adds beyond the contract travel along."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="allow",
        arbitrary_types_allowed=True,
    )


P = TypeVar("P", bound=BaseModel)


def without_keys(params: P, keys: set[str]) -> P:
    """A copy of `params` built only from the fields that were set, minus `keys` (snake_case names)."""
    data = {k: getattr(params, k) for k in params.model_fields_set if k not in keys}
    return type(params)(**data)
