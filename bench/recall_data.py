"""A deterministic recall-quality dataset: long multi-session agent conversations with planted, annotated facts.

Each conversation is mostly realistic filler (coding help, shell logs, tool output, planning, small talk, some
Chinese and Japanese) with facts planted at random turns across all sessions, plus distractors that share the
question's topic or wording but not its answer: other subjects with the same shape, older values of updated
facts, near-miss identifiers. Questions come in five classes (paraphrase, temporal, multi_hop, cjk,
identifier); each names the evidence turn(s) that hold its answer. Facts are stated in one wording and asked
in another. ``dev`` and ``test`` draw from disjoint halves of the fact pool (``bench.recall_pools``), so
anything tuned on dev is scored on unseen templates and values. Same arguments, same output.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from bench.recall_pools import CJK, HOP, IDENT, NAMES, PARA, TEMP

__all__ = ["STOP_WORDS", "Conversation", "Question", "Session", "Turn", "content_words", "generate"]

QClass = Literal["paraphrase", "temporal", "multi_hop", "cjk", "identifier"]
Split = Literal["dev", "test"]
Pos = tuple[int, int]


@dataclass(frozen=True)
class Turn:
    role: Literal["user", "assistant"]
    text: str
    timestamp: str  # ISO-8601 UTC, increasing within a conversation


@dataclass(frozen=True)
class Session:
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    qclass: QClass
    evidence: tuple[Pos, ...]  # (session index, turn index) of every turn that holds the answer
    since: str | None = None  # explicit time bound the question states, ISO, else None
    answer: str = ""  # the planted value


@dataclass(frozen=True)
class Conversation:
    key: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]


STOP_WORDS = frozenset(
    "a an the is are was were be been am do does did i me my we our us you your it its this that these those "
    "of in on at to for from with by and or but not no so if as what when where which who whom how why "
    "there here now then just can could should would will has have had get got s t m re ll ve d".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased word stems (first five letters) minus stop words: the unit the paraphrase rule counts."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS}


# --- filler pools ---------------------------------------------------------------------------------------------
_VERBS = "parse load flush merge validate render fetch retry encode index compact resolve batch sort dedupe".split()
_NOUNS = "config payload session cursor manifest token record snapshot header queue chunk event invoice user".split()
_DIRS = "src/app lib/core services/api pkg/worker internal/store cmd/tool web/components scripts".split()
_LANGS = ("python", "typescript", "go", "sql", "bash")
_CONCERNS = (
    "blocking the event loop", "loading everything into memory", "a global lock", "breaking the public API",
    "pulling in another dependency", "copying the whole list", "N+1 queries", "leaking file handles",
)  # fmt: skip
_OPENERS = ("How do I", "What's the cleanest way to", "Can you show me how to", "Is there an idiomatic way to",
            "I keep failing to", "Quick one: how would you")  # fmt: skip
_SNIPPETS = {
    "python": "def {fn}(items: list[dict]) -> list[dict]:\n    seen: set[str] = set()\n    out = []\n"
    '    for item in items:\n        key = item.get("{noun}_id")\n        if key in seen:\n            continue\n'
    "        seen.add(key)\n        out.append(item)\n    return out",
    "typescript": "export async function {fn}(ids: string[]): Promise<Map<string, {Noun}>> {{\n"
    "  const rows = await db.{noun}.findMany({{ where: {{ id: {{ in: ids }} }} }});\n"
    "  return new Map(rows.map((r) => [r.id, r]));\n}}",
    "go": "func {Fn}(ctx context.Context, in <-chan {Noun}) error {{\n\tfor {{\n\t\tselect {{\n"
    "\t\tcase <-ctx.Done():\n\t\t\treturn ctx.Err()\n\t\tcase v, ok := <-in:\n\t\t\tif !ok {{\n\t\t\t\treturn nil\n"
    '\t\t\t}}\n\t\t\tif err := handle(v); err != nil {{\n\t\t\t\treturn fmt.Errorf("{fn}: %w", err)\n\t\t\t}}\n'
    "\t\t}}\n\t}}\n}}",
    "sql": "SELECT {noun}_id, count(*) AS n, max(created_at) AS last_seen\nFROM {noun}_events\n"
    "WHERE created_at >= now() - interval '{k} days'\nGROUP BY {noun}_id\nHAVING count(*) > {k}\nORDER BY n DESC;",
    "bash": "#!/usr/bin/env bash\nset -euo pipefail\nfor f in {dir}/*.json; do\n"
    "  jq -c '.{noun} // empty' \"$f\" >> /tmp/{fn}.ndjson\ndone\nwc -l /tmp/{fn}.ndjson",
}
_INTROS = ("Sure. The trick is to keep it streaming:", "Here's a version that avoids that:",
           "I'd restructure it slightly:", "Two options; the simpler one first:", "This works:")  # fmt: skip
_OUTROS = ("This stays O(n) and keeps order.", "Add a test for the empty case too.", "Benchmark it before merging.",
           "If the input is huge, page it instead.", "Happy to adapt it to your types.", "")  # fmt: skip
_CMDS = ("pytest -x tests/{noun}", "kubectl logs deploy/{noun}-worker --tail=50", "docker compose up {noun}",
         "make build", "npm run test -- {noun}", "go test ./{dir}/...", "terraform plan -target={noun}")  # fmt: skip
_LOG = (
    "INFO worker started pid={k}", "DEBUG fetched {k} rows in {ms}ms", "WARN retrying request attempt={a}/5",
    "INFO cache hit ratio=0.{k}", "WARN slow query took {ms}ms on the {noun} table", "INFO flushed {k} events",
    "DEBUG acquiring lock {noun}:{k}", "INFO deploy step {a}/5 done", "WARN database pool at {k}% capacity",
)  # fmt: skip
_ERRS = (
    "KeyError: '{noun}'", "TypeError: 'NoneType' object is not subscriptable", "connection reset by peer",
    "panic: runtime error: index out of range [{a}]", "ECONNREFUSED 127.0.0.1:6379", "deadlock detected",
    "OOMKilled", "context deadline exceeded", "ModuleNotFoundError: No module named 'yaml'", "permission denied",
)  # fmt: skip
_DIAG = ("The real failure is the last line: `{err}`. {fix}", "Ignore the warnings; `{err}` is what kills it. {fix}",
         "Looks like `{err}` after the retries. {fix}")  # fmt: skip
_FIXES = ("Check that the env var is set in CI.", "Bump the timeout and add backoff.", "Pin the dependency version.",
          "The container needs more memory; set limits explicitly.", "Guard the None case before indexing.",
          "Restart the local service, the port is stale.", "Run the migration before the tests.")  # fmt: skip
_SMALL = (
    ("morning! coffee's kicking in, let's get going", "Good morning! What are we tackling first?"),
    ("ugh, long night, the baby was up at 3", "Sorry to hear that. Let's keep today's list short."),
    ("it's pouring here, perfect day to stay in and refactor", "Refactor weather it is. Where do you want to start?"),
    ("did you see the match yesterday? unreal finish", "I didn't watch it, but I hear the last minutes were wild."),
    ("I think I'm finally getting the hang of vim motions", "Nice! `ci(` and `dap` are life-changing once they stick."),
    ("lunch was terrible today, avoid the canteen curry", "Noted. Hopefully the afternoon goes better."),
    ("my cousin's wedding is next month, I still need a suit", "Plenty of time. Want a reminder two weeks out?"),
    ("thanks, that fixed it!", "Great. Anything else on the list?"),
    ("ok I'm back, the meeting ran long", "Welcome back. We were in the middle of the retry logic."),
    ("remind me what we were doing before the break?", "We were tidying the error handling in the worker."),
)  # fmt: skip
_PROJECTS = ("the search rewrite", "moving CI to the new runners", "the Q3 hiring loop", "deprecating the v1 API",
             "the onboarding docs", "splitting the monolith's auth module", "the dashboard refresh")  # fmt: skip
_STEPS = (
    "Write down the current behaviour and owners.", "List the consumers and notify them.", "Add metrics first.",
    "Ship behind a flag to 5% of traffic.", "Run both paths in shadow mode for a week.", "Agree on a rollback plan.",
    "Delete the dead code and the old dashboards.", "Schedule a short retro.", "Timebox the spike to two days.",
)  # fmt: skip
_REVIEW = ("Naming nit: `{fn}` reads better as a verb phrase.", "This swallows the exception; log it at least.",
           "Consider extracting the {noun} handling into a helper.", "Missing a test for the empty {noun} case.",
           "LGTM otherwise.", "The loop re-reads the {noun} on each pass; hoist it.")  # fmt: skip
_CJK_PAIRS = (
    ("这个报错是什么意思？{err}", "这是运行时错误，通常是输入为空导致的，先加个判空。"),
    ("数据库连接池又满了，怎么排查？", "先看慢查询日志，再检查有没有连接没有释放。"),
    ("今天的会议推迟到下午了。", "好的，那我们先把测试修完。"),
    ("このテスト、たまに落ちるんだけど原因わかる？", "タイミング依存っぽいですね。固定のシードで再現してみましょう。"),
    ("ログにタイムアウトがずっと出てる。", "リトライ設定を見直しましょう。まずは上限を確認します。"),
    ("帮我把这段 {lang} 代码重构一下。", "可以，先把重复的逻辑抽成函数 {fn}。"),
)  # fmt: skip
_ACKS = ("Noted.", "Got it, thanks.", "Thanks, I'll keep that in mind.", "Understood.", "Okay, noted for later.")
_ACK_CJK = {"zh": ("好的，记下了。", "收到。"), "ja": ("了解しました。", "メモしておきます。")}
_PREFIX = ("", "", "Quick note before I forget: ", "FYI, ", "Context for later: ", "Heads-up: ", "Oh, and ")
_PLAIN_FIRST = frozenset("My We The Our Let's Standup Rent Gym Booked Update: Swap: Good Change Finance".split())
_SUFFIX = ("", "", " Anyway, let's continue.", " Keep that in mind.", " Right, on to the failing test.")
_PREFIX_CJK = {"zh": ("", "顺便说一句，", "备忘："), "ja": ("", "メモ：", "ちなみに、")}
_RECORD_ASK = ("I dumped the notes from this morning's call into notes.md; record anything important.",
               "Read thread.txt (export from the team chat) and save what was decided.",
               "Please go through the meeting doc I just shared and log the key points.")  # fmt: skip
_RECORD_LEAD = ("Saved to memory:", "Recorded from the notes:", "Logged this from the thread:")


def _slots(rng: random.Random) -> dict[str, str | int]:
    verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
    fn = f"{verb}_{noun}s"
    return {"fn": fn, "Fn": "".join(p.title() for p in fn.split("_")), "noun": noun, "Noun": noun.title(),
            "verb": verb, "dir": rng.choice(_DIRS), "k": rng.randint(2, 99), "a": rng.randint(1, 5),
            "ms": rng.randint(40, 9000), "lang": rng.choice(_LANGS)}  # fmt: skip


def _overlap(a: str, b: str) -> int:
    return len(content_words(a) & content_words(b))


def _filler(rng: random.Random, *, task: bool = False) -> tuple[str, str]:
    """One realistic user → assistant exchange, randomly recombined from the pools (`task`: a work request)."""
    s = _slots(rng)
    kind = rng.choices(range(7), weights=(5, 4, 0, 2, 2, 2, 0) if task else (5, 4, 3, 2, 2, 2, 1))[0]
    if kind == 0:
        lang = str(s["lang"])
        user = f"{rng.choice(_OPENERS)} {s['verb']} each {s['noun']} in {lang} without {rng.choice(_CONCERNS)}?"
        code = _SNIPPETS[lang].format(**s)
        return user, f"{rng.choice(_INTROS)}\n\n```{lang}\n{code}\n```\n\n{rng.choice(_OUTROS)}".strip()
    if kind == 1:
        err = rng.choice(_ERRS).format(**s)
        start = rng.randint(0, 80_000)
        stamps = sorted(start + rng.randint(0, 900) for _ in range(rng.choice((3, 5, 8, 12, 22))))
        lines = [f"{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d} {rng.choice(_LOG).format(**_slots(rng))}"
                 for t in stamps]  # fmt: skip
        log = "\n".join([*lines, f"ERROR {err}"])
        user = f"Running `{rng.choice(_CMDS).format(**s)}` gives me this:\n```\n{log}\n```"
        return user, rng.choice(_DIAG).format(err=err, fix=rng.choice(_FIXES))
    if kind == 2:
        return rng.choice(_SMALL)
    if kind == 3:
        steps = rng.sample(_STEPS, rng.randint(3, 6))
        plan = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
        return f"Can you sketch a plan for {rng.choice(_PROJECTS)}?", f"Here's a first cut:\n{plan}"
    if kind == 4:
        hits = "\n".join(f"{_slots(rng)['dir']}/{s['noun']}.py:{rng.randint(3, 400)}:    {s['fn']}(batch)"
                         for _ in range(rng.randint(1, 9)))  # fmt: skip
        return f"grep the repo for callers of `{s['fn']}`", f"Found these call sites:\n```\n{hits}\n```"
    if kind == 5:
        diff = f"@@ -{s['k']},6 +{s['k']},8 @@\n-    {s['noun']} = load()\n+    {s['noun']} = load(strict=True)\n"
        diff += f"+    if not {s['noun']}:\n+        return []\n     return {s['fn']}({s['noun']})"
        notes = "\n".join(f"- {c.format(**s)}" for c in rng.sample(_REVIEW, rng.randint(1, 3)))
        return f"Can you review this diff?\n```diff\n{diff}\n```", notes
    user, reply = rng.choice(_CJK_PAIRS)
    return user.format(err=rng.choice(_ERRS).format(**s), **s), reply.format(**s)


def _lang(text: str) -> str:
    if re.search(r"[\u3040-\u30ff]", text):
        return "ja"
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def _ident(rng: random.Random, pattern: str) -> str:
    return "".join(rng.choice("0123456789") if c == "#" else rng.choice("abcdef") if c == "@" else c for c in pattern)


def _near_miss(rng: random.Random, ident: str, pattern: str) -> str:
    """The same identifier with one random digit changed (db-eu-3.internal → db-eu-5.internal)."""
    spots = [i for i, c in enumerate(pattern) if c == "#"]
    i = rng.choice(spots)
    return ident[:i] + rng.choice([d for d in "0123456789" if d != ident[i]]) + ident[i + 1 :]


class _Builder:
    """Plants facts into free slots of one conversation's grid, then fills the rest with filler."""

    def __init__(self, rng: random.Random, split: Split, sessions: int, turns: int) -> None:
        self.rng, self.sessions, self.turns = rng, sessions, turns
        self.planted: dict[Pos, tuple[str, str | None]] = {}  # text, paraphrase question guarding the overlap
        self.used: list[str] = []
        names = NAMES[split].split("|")
        rng.shuffle(names)
        self.hop_names, self.names = names[:14], names[14:]

    def value(self, options: str, *, avoid: tuple[str, ...] = ()) -> str:
        """A value that neither contains nor is contained in anything planted so far."""
        pool = [v for v in options.split("|") if v not in avoid]
        clean = [v for v in pool if not any(v in u or u in v for u in self.used)]
        v = self.rng.choice(clean or pool)
        self.used.append(v)
        return v

    def fill(self, template: str, **slots: str) -> str:
        return template.format(n=self.rng.choice(self.names), **slots)

    def wrap(self, text: str) -> str:
        lang = _lang(text)
        if lang != "en":
            return self.rng.choice(_PREFIX_CJK[lang]) + text
        prefix = self.rng.choice(_PREFIX)
        if prefix.endswith((", ", "and ")):  # mid-sentence: lower-case a plain first word, never a name or id
            first, _, rest = text.partition(" ")
            text = f"{first.lower()} {rest}" if first in _PLAIN_FIRST else text
            prefix = prefix if first in _PLAIN_FIRST else ""
        return prefix + text + self.rng.choice(_SUFFIX)

    def plant(
        self, text: str, *, lo: int = 0, hi: int = -1, after: Pos = (-1, -1), guard: str | None = None
    ) -> Pos | None:
        """Put `text` in a free slot of sessions lo..hi after `after`; sometimes as an assistant's note."""
        hi = self.sessions - 1 if hi < 0 else hi
        free = [(s, t) for s in range(lo, hi + 1) for t in range(0, self.turns, 2)
                if (s, t) > after and (s, t) not in self.planted]  # fmt: skip
        if not free:
            return None
        s, t = self.rng.choice(free)
        leads = [lead for lead in _RECORD_LEAD if guard is None or _overlap(f"{lead} {text}", guard) <= 1]
        if _lang(text) == "en" and t + 1 < self.turns and leads and self.rng.random() < 0.15:
            self.planted[(s, t)] = (self.rng.choice(_RECORD_ASK), None)
            self.planted[(s, t + 1)] = (f"{self.rng.choice(leads)} {text}", guard)
            return s, t + 1
        wrapped = self.wrap(text)
        self.planted[(s, t)] = (text if guard and _overlap(wrapped, guard) > 1 else wrapped, guard)
        return s, t

    def build(self, start: datetime) -> tuple[Session, ...]:
        """All sessions (planted turns plus filler), sessions days apart and turns minutes apart."""
        rng, out, clock = self.rng, [], start
        for s in range(self.sessions):
            texts: list[str] = []
            for t in range(0, self.turns, 2):
                user, reply = self.planted.get((s, t)), self.planted.get((s, t + 1))
                if user and reply:
                    texts += [user[0], reply[0]]
                elif user:
                    texts += self._with_reply(*user)
                else:
                    texts += _filler(rng)
            turns = []
            for t, text in enumerate(texts[: self.turns]):
                clock += timedelta(minutes=rng.randint(1, 7), seconds=rng.randint(0, 59))
                role: Literal["user", "assistant"] = "user" if t % 2 == 0 else "assistant"
                turns.append(Turn(role, text, clock.strftime("%Y-%m-%dT%H:%M:%SZ")))
            out.append(Session(tuple(turns)))
            day = datetime(clock.year, clock.month, clock.day, tzinfo=UTC)
            clock = day + timedelta(days=rng.randint(1, 4), hours=8, minutes=rng.randint(0, 150))
        return tuple(out)

    def _with_reply(self, text: str, guard: str | None) -> list[str]:
        """A planted user turn and the assistant's reply: an ack, or a fact mentioned alongside a filler ask."""
        lang = _lang(text)
        if lang != "en":
            return [text, self.rng.choice(_ACK_CJK[lang])]
        if self.rng.random() < 0.5:
            for _ in range(4):
                user, reply = _filler(self.rng, task=True)
                combined = f"{text}\n\n{user}"
                if guard is None or _overlap(combined, guard) <= 1:
                    return [combined, f"{self.rng.choice(_ACKS)}\n\n{reply}"]
        return [text, self.rng.choice(_ACKS)]


def _day(pos_day: datetime) -> tuple[str, str]:
    """An ISO midnight and a human phrase for it ('March 7', '2026-03-07' or '7 March')."""
    phrase = [f"{pos_day:%B} {pos_day.day}", f"{pos_day:%Y-%m-%d}", f"{pos_day.day} {pos_day:%B}"]
    return pos_day.strftime("%Y-%m-%dT00:00:00Z"), phrase[pos_day.day % 3]


def _conversation(rng: random.Random, split: Split, ci: int, n_sessions: int, n_turns: int) -> Conversation:
    b = _Builder(rng, split, n_sessions, n_turns)
    per_class = max(1, min(7, int(n_sessions * ((n_turns + 1) // 2) * 0.75 / 12.5)))
    qs: list[tuple[str, QClass, tuple[Pos, ...], str, int | None]] = []  # text, class, evidence, answer, since-s
    single: tuple[tuple[QClass, dict[str, tuple[tuple[str, ...], ...]]], ...] = (("paraphrase", PARA), ("cjk", CJK))
    for qclass, pool in single:
        for stmt, question, distractor, values in rng.sample(pool[split], per_class):
            v = b.value(values)
            pos = b.plant(b.fill(stmt, v=v), guard=question if qclass == "paraphrase" else None)
            b.plant(b.fill(distractor, v=b.value(values, avoid=(v,))))
            if pos:
                qs.append((question, qclass, (pos,), v, None))
    for i, (first, update, q_latest, q_since, values) in enumerate(rng.sample(TEMP[split], per_class)):
        k = min(rng.choice((2, 2, 3)), max(2, n_sessions), len(values.split("|")))
        vals = [b.value(values) for _ in range(k)]
        spread = n_sessions >= k  # one statement per session, in order; else all in session 0, in order
        sessions = sorted(rng.sample(range(n_sessions), k)) if spread else [0] * k
        last: Pos | None = (-1, -1)
        for j, (s, v) in enumerate(zip(sessions, vals, strict=True)):
            if last is not None:
                last = b.plant(b.fill(first if j == 0 else update, v=v), lo=s, hi=s, after=last)
        if last is not None:
            bound = last[0] if spread and i % 2 == 1 else None  # every other one states a time bound
            qs.append((q_latest if bound is None else q_since, "temporal", (last,), vals[-1], bound))
    for hop1, hop2, question, xs, vs in rng.sample(HOP[split], per_class):
        p, p2 = b.hop_names.pop(), b.hop_names.pop()
        x, v = b.value(xs), b.value(vs)
        a, c = b.plant(b.fill(hop1, p=p, x=x)), b.plant(b.fill(hop2, x=x, v=v))
        x2 = b.value(xs, avoid=(x,))
        if rng.random() < 0.6:
            b.plant(b.fill(hop1, p=p2, x=x2))
        if rng.random() < 0.7:
            b.plant(b.fill(hop2, x=x2, v=b.value(vs, avoid=(v,))))
        if a and c:
            qs.append((question.format(p=p), "multi_hop", tuple(sorted((a, c))), v, None))
    for pattern, stmt, question, same_id, values in rng.sample(IDENT[split], per_class):
        ident = _ident(rng, pattern)
        while any(ident in u or u in ident for u in b.used):
            ident = _ident(rng, pattern)
        b.used.append(ident)
        v = b.value(values)
        pos = b.plant(b.fill(stmt, id=ident, v=v))
        b.plant(b.fill(stmt, id=_near_miss(rng, ident, pattern), v=b.value(values, avoid=(v,))))
        if rng.random() < 0.6:
            b.plant(b.fill(same_id, id=ident))
        if pos:
            qs.append((question.format(id=ident), "identifier", (pos,), v, None))
    built = b.build(datetime(2026, 3, 1, 8, rng.randint(0, 59), tzinfo=UTC))
    rng.shuffle(qs)
    questions = []
    for j, (text, qclass, evidence, answer, since_s) in enumerate(qs, 1):
        since = None
        if since_s is not None:
            opened = datetime.fromisoformat(built[since_s].turns[0].timestamp.replace("Z", "+00:00"))
            since, phrase = _day(opened)
            text = text.format(date=phrase)
        questions.append(Question(f"c{ci}-q{j:02d}", text, qclass, evidence, since, answer))
    return Conversation(f"agent:main:recall-{split}-c{ci}", built, tuple(questions))


def generate(
    split: Literal["dev", "test"],
    *,
    seed: int = 0,
    conversations: int = 4,
    sessions_per_conversation: int = 6,
    turns_per_session: int = 40,
) -> list[Conversation]:
    """`conversations` conversations for one split; the same arguments always give identical output."""
    if split not in ("dev", "test"):
        raise ValueError(f"split must be 'dev' or 'test', not {split!r}")
    rng = random.Random(seed * 2 + (split == "test"))
    return [
        _conversation(random.Random(rng.getrandbits(64)), split, ci, sessions_per_conversation, turns_per_session)
        for ci in range(conversations)
    ]
