"""``doctor``: is the database usable, which engine runs, is the tokenizer exact, is the DAG consistent.

The doctor reads, never writes: the database is opened without migrating. It does not look engines
up itself (inspection sits below the registry): the caller hands in :class:`EngineFacts`, gathered
from the registry once the store is known, and the doctor turns them into checks.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import DatabaseCorruptError, OpenClawCtxError
from openclaw_ctx.inspect.dag import deep_check
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import tokenizer_status

__all__ = ["Check", "DoctorReport", "EngineFacts", "EngineFactsSource", "Status", "diagnose"]

Status = Literal["ok", "warn", "fail"]


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str


@dataclass
class DoctorReport:
    """Everything ``doctor`` found; ``ok`` is False when any check failed."""

    checks: list[Check] = field(default_factory=list)
    engines: list[dict[str, Any]] = field(default_factory=list)
    quarantines: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True unless a check failed."""
        return all(c.status != "fail" for c in self.checks)

    def add(self, name: str, status: Status, detail: str) -> None:
        """Record a check."""
        self.checks.append(Check(name, status, detail))

    def to_json(self) -> dict[str, Any]:
        """The ``doctor --json`` document."""
        return {"ok": self.ok, **asdict(self)}


@dataclass(frozen=True)
class EngineFacts:
    """What the registry knows about the engine slot, gathered by the caller."""

    selected: str
    """The engine the slot names."""
    source: str
    """Where the choice came from (config, env, default)."""
    load_errors: dict[str, str]
    """Entry points that failed to load: name → error."""
    engines: list[dict[str, Any]]
    """Every registered engine: id, owner, lifecycle, selected."""
    quarantines: list[dict[str, Any]]
    active: str | None = None
    """The engine that would run; None when resolution itself failed."""
    owner: str | None = None
    fallback_reason: str | None = None
    resolve_error: str | None = None
    """``Type: message`` of the failure when no engine could be resolved at all."""

    @property
    def installed(self) -> set[str]:
        """Ids of the registered engines."""
        return {str(e["id"]) for e in self.engines}


EngineFactsSource = Callable[[OpenClawConfig | None, Store | None], Awaitable[EngineFacts]]
"""How the caller gathers :class:`EngineFacts` for a config and the (usable or absent) store."""


def _exists(path: Path) -> bool:
    return path.exists()


def _damage(exc: OpenClawCtxError) -> str:
    return f"damaged: {exc.detail}" if isinstance(exc, DatabaseCorruptError) else exc.detail


async def _check_database(report: DoctorReport, path: Path) -> Store | None:
    report.facts["database"] = str(path)
    if not _exists(path):
        report.add("database", "warn", f"{path} does not exist yet (the first write creates it)")
        return None
    try:
        store = await Store.connect(path)
    except OpenClawCtxError as exc:
        report.add("database", "fail", _damage(exc))
        return None
    try:
        state = await store.schema_state()
        report.facts.update(schema_revision=state.current, schema_head=state.head)
        async with store.read() as conn:
            mode = await conn.scalar(text("PRAGMA journal_mode"))
            damage = [str(r[0]) for r in await conn.execute(text("PRAGMA quick_check(5)"))]
            tables = await conn.scalar(text("SELECT count(*) FROM sqlite_master WHERE type = 'table'"))
    except OpenClawCtxError as exc:
        await store.engine.dispose()
        report.add("database", "fail", _damage(exc))
        return None
    report.facts["journal_mode"] = mode
    ok = damage == ["ok"]
    report.add("database", "ok" if ok else "fail", str(path) if ok else f"{path}: damaged: {'; '.join(damage)}")
    if state.up_to_date:
        report.add("schema", "ok", f"revision {state.current} (head)")
    elif state.current is None and not tables:
        # A first open that was interrupted (or never wrote): nothing is stored, the next write migrates.
        report.add("schema", "warn", "empty database (no tables yet): the first write creates the schema")
    else:
        report.add(
            "schema", "fail", f"revision {state.current or 'empty'}, head {state.head}: run `openclaw-ctx db upgrade`"
        )
    report.add("WAL", "ok" if mode == "wal" else "warn", f"journal_mode={mode}")
    if ok and state.up_to_date:
        return store
    await store.engine.dispose()  # engines must not be handed a store they cannot use
    return None


async def _engine_facts_with_a_store(
    engine_facts: EngineFactsSource, config: OpenClawConfig | None, store: Store | None
) -> EngineFacts:
    """The registry's facts; without a usable database (not created yet, or failing its own check) the
    engine is started on a scratch store, so the report says whether the engine works, not that the
    database is missing a second time."""
    if store is not None:
        return await engine_facts(config, store)
    with tempfile.TemporaryDirectory(prefix="openclaw-ctx-doctor-") as scratch:
        async with await Store.open(Path(scratch) / "scratch.db") as scratch_store:
            return await engine_facts(config, scratch_store)


def _check_engine(report: DoctorReport, facts: EngineFacts) -> None:
    for name, error in sorted(facts.load_errors.items()):
        # A broken plugin the slot does not select is worth a warning; the selected one is fatal.
        report.add(
            f"plugin {name}", "fail" if name == facts.selected else "warn", f"entry point failed to load: {error}"
        )
    if facts.resolve_error is not None:
        report.add("engine", "fail", f"{facts.selected} ({facts.source}): {facts.resolve_error}")
    else:
        report.facts.update(engine_selected=facts.selected, engine_source=facts.source, engine_active=facts.active)
        if facts.fallback_reason:
            report.add(
                "engine",
                "fail",
                f"{facts.selected} ({facts.source}) is {facts.fallback_reason}; running {facts.active}",
            )
        else:
            report.add("engine", "ok", f"{facts.active} ({facts.source}, owner {facts.owner})")
    report.engines = facts.engines
    report.quarantines = facts.quarantines


_LOSSLESS_SESSIONS = text("SELECT count(*) FROM sessions WHERE engine_id = :engine")


async def _check_lossless_installed(report: DoctorReport, facts: EngineFacts, store: Store | None) -> None:
    """Name lossless-claw when it is missing; a warning once the store holds sessions it wrote."""
    if LOSSLESS_ENGINE_ID in facts.installed or LOSSLESS_ENGINE_ID in facts.load_errors:
        return
    written = 0
    if store is not None:
        async with store.read() as conn:
            written = int(await conn.scalar(_LOSSLESS_SESSIONS, {"engine": LOSSLESS_ENGINE_ID}) or 0)
    if written:
        detail = f"not installed: {written} session(s) were written by it; they stay readable, but cannot run on it"
        report.add(f"plugin {LOSSLESS_ENGINE_ID}", "warn", detail)
    else:
        report.add(f"plugin {LOSSLESS_ENGINE_ID}", "ok", "not installed (optional: the lossless DAG-summary engine)")


async def _deep_check(report: DoctorReport, store: Store | None) -> None:
    if store is None:
        report.add("deep check", "warn", "skipped: no usable database")
        return
    found = await deep_check(store)
    problems = [str(p) for p in found]
    report.facts["deep_problems"] = problems
    errors = [str(p) for p in found if p.severity == "error"]
    if errors:
        report.add("deep check", "fail", f"{len(errors)} problem(s): " + "; ".join(errors[:5]))
    elif problems:
        # The store is consistent; the history itself has a shape worth knowing (e.g. an OpenClaw
        # compaction that kept messages an earlier summary already covers).
        report.add("deep check", "warn", f"{len(problems)} warning(s): " + "; ".join(problems[:5]))
    else:
        report.add("deep check", "ok", "summary DAG and context items are consistent")


async def _check_vectors(report: DoctorReport, store: Store | None) -> None:
    """Semantic recall's model and stored vectors; anything wrong degrades recall to words, so a warning."""
    if importlib.util.find_spec("wordllama") is None:
        report.add("semantic recall", "warn", "the wordllama package is not installed: recall ranks by words only")
        return
    if store is None:
        return
    try:
        async with store.read() as conn:
            row = (
                await conn.exec_driver_sql(
                    "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM message_vectors), "
                    "(SELECT count(*) FROM message_vectors WHERE length(vector) <> 256), "
                    "(SELECT count(*) FROM summaries), (SELECT count(*) FROM summary_vectors)"
                )
            ).one()
    except DBAPIError as exc:
        report.add("semantic recall", "warn", f"the vector tables cannot be read ({exc.orig}): recall ranks by words")
        return
    messages, vectors, damaged, summaries, summary_vectors = (int(v) for v in row)
    report.facts["vectors"] = {"messages": messages, "message_vectors": vectors, "damaged": damaged}
    if damaged:
        report.add(
            "semantic recall", "warn", f"{damaged} stored vector(s) are damaged; `openclaw-ctx embed` redoes them"
        )
    elif vectors + summary_vectors < messages + summaries:
        missing = messages + summaries - vectors - summary_vectors
        report.add(
            "semantic recall", "ok", f"{missing} item(s) have no stored vector yet (recall embeds them in memory; "
            "`openclaw-ctx embed` stores them)",
        )  # fmt: skip
    else:
        report.add(
            "semantic recall", "ok", f"every message and summary has a stored vector ({vectors + summary_vectors})"
        )


def _check_tokenizer(report: DoctorReport) -> None:
    status = tokenizer_status()
    report.facts["tokenizer"] = asdict(status)
    if status.exact:
        report.add("tokenizer", "ok", f"{status.counter} ({status.detail})")
    else:
        report.add("tokenizer", "warn", f"HEURISTIC {status.counter}: token counts are estimates ({status.detail})")


async def diagnose(
    db: Path,
    load_config: Callable[[], OpenClawConfig],
    default_config_path: Path,
    engine_facts: EngineFactsSource,
    *,
    deep: bool = False,
) -> DoctorReport:
    """Run every doctor check.

    Args:
        db: the database file (opened without migrating; never created).
        load_config: loads openclaw.json (its errors become the ``config`` check).
        default_config_path: what to name when no config file exists.
        engine_facts: gathers the registry's facts for the loaded config and the usable store.
        deep: also validate every key's summary DAG and context items.
    """
    report = DoctorReport()
    config: OpenClawConfig | None = None
    try:
        config = load_config()
        report.add("config", "ok", config.source_path or f"{default_config_path} (absent: defaults)")
    except OpenClawCtxError as exc:
        report.add("config", "fail", exc.detail)
    store = await _check_database(report, db)
    try:
        facts = await _engine_facts_with_a_store(engine_facts, config, store)
        _check_engine(report, facts)
        await _check_lossless_installed(report, facts, store)
        _check_tokenizer(report)
        await _check_vectors(report, store)
        if deep:
            await _deep_check(report, store)
    finally:
        if store is not None:
            await store.engine.dispose()
    return report
