"""The lossless engine's own table: the `large_content` sidecar (on the shared declarative Base).

Created by migration ``0002_lossless_sidecar``. The original message stays intact in
``messages.message_json``; a row here says that, in the model's view, the message is shown as
`stub` (a short marker plus a deterministic exploration summary) instead of its full content.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from openclaw_ctx.store.models import NOW, Base

__all__ = ["LargeContent"]


class LargeContent(Base):
    """One externalised message: a tool output or file content over `largeFileTokenThreshold`."""

    __tablename__ = "large_content"
    __table_args__ = (
        Index("ux_large_content_message", "message_id", unique=True),
        Index("ix_large_content_key", "session_key"),
    )

    file_id: Mapped[str] = mapped_column(String, primary_key=True)
    """`file_` + 16 hex characters."""
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.message_id", ondelete="RESTRICT"), nullable=False)
    kind: Mapped[str] = mapped_column(String, nullable=False)
    """`tool_output` or `file`."""
    name: Mapped[str | None] = mapped_column(String)
    """Tool name or file name."""
    mime_type: Mapped[str | None] = mapped_column(String)
    byte_size: Mapped[int] = mapped_column(Integer, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    """Tokens of the original message."""
    stub: Mapped[str] = mapped_column(Text, nullable=False)
    """What the model sees instead: marker line + exploration summary + how to retrieve it."""
    stub_token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)
