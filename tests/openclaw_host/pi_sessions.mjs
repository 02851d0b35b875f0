// pi's own session code as the second oracle of the transcript differential test.
//
//   node pi_sessions.mjs <pi-coding-agent dir> write DIR          write fixtures with pi's SessionManager
//   node pi_sessions.mjs <pi-coding-agent dir> stress N DIR       N seeded random sessions, the same way
//   node pi_sessions.mjs <pi-coding-agent dir> context FILE...    the context pi rebuilds from each file
//
// `write` prints one {"case", "file"} line per fixture; `context` one {file, messages, thinkingLevel,
// model} (or {file, error}) line per file, by the path pi's SessionManager takes: parseSessionEntries,
// migrateSessionEntries, the last entry as the leaf, buildSessionContext.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [piDir, mode, ...rest] = process.argv.slice(2);
const sm = await import(pathToFileURL(path.join(piDir, "dist", "core", "session-manager.js")).href);

let clock = 1_767_225_600_000;
const at = () => (clock += 1000);
const usage = {
  input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15,
  cost: { input: 0.00008939999999999999, output: 0, cacheRead: 0, cacheWrite: 0, total: 0.00008939999999999999 },
};
const user = (text) => ({ role: "user", content: text, timestamp: at() });
const assistant = (text, calls = []) => ({
  role: "assistant",
  content: [{ type: "text", text }, ...calls.map((id) => ({ type: "toolCall", id, name: "read", arguments: { path: id } }))],
  api: "openai-completions", provider: "p", model: "m1", usage,
  stopReason: calls.length ? "toolUse" : "stop", timestamp: at(),
});
const result = (id, text) => ({
  role: "toolResult", toolCallId: id, toolName: "read", content: [{ type: "text", text }], isError: false, timestamp: at(),
});

function turns(s, n, tag) {
  const ids = [];
  for (let i = 0; i < n; i++) {
    ids.push(s.appendMessage(user(`${tag} question ${i}`)));
    ids.push(s.appendMessage(assistant(`${tag} answer ${i}`)));
  }
  return ids;
}

const cases = {
  basic(s) {
    s.appendModelChange("p", "m0");
    s.appendThinkingLevelChange("high");
    s.appendMessage(user("read the file"));
    s.appendMessage(assistant("reading", ["call_1"]));
    s.appendMessage(result("call_1", "file contents"));
    s.appendMessage(assistant("done"));
    s.appendUsage?.("turn", "p", "m1", usage);
  },
  "compactions-pointing-back"(s) {
    const early = turns(s, 3, "early");
    s.appendCompaction("first summary", early[2], 1000);
    turns(s, 2, "middle");
    s.appendCompaction("second summary", early[2], 2000); // the same early firstKeptEntryId, as OpenClaw writes
    turns(s, 2, "late");
  },
  "compaction-keeps-nothing"(s) {
    turns(s, 2, "before");
    s.appendCompaction("all of it", undefined, 500);
    turns(s, 1, "after");
  },
  "branch-with-summary"(s) {
    const ids = turns(s, 3, "main");
    s.branchWithSummary(ids[1], "what the abandoned path did");
    turns(s, 2, "branch");
  },
  "branch-without-summary"(s) {
    const ids = turns(s, 3, "main");
    s.branch(ids[3]);
    turns(s, 1, "retry");
  },
  "custom-entries"(s) {
    const ids = turns(s, 1, "a");
    s.appendCustomEntry("ext-state", { n: 1, nested: { ok: true } });
    s.appendCustomMessageEntry("note", "an injected note", true, { source: "ext" });
    s.appendCustomMessageEntry("hidden", [{ type: "text", text: "not displayed, still context" }], false);
    s.appendLabelChange(ids[0], "bookmark");
    s.appendSessionInfo("a named session");
    turns(s, 1, "b");
  },
  "reset-leaf"(s) {
    turns(s, 2, "old");
    s.resetLeaf();
    turns(s, 2, "new root");
  },
  "context-edit"(s) {
    const ids = turns(s, 3, "edited");
    s.appendContextEdit(ids[1], { content: "a shorter answer" });
    s.appendContextEdit(ids[2], null);
    turns(s, 1, "after");
  },
};

// A seeded random session through pi's API: turns with tool calls, compactions keeping from a random
// earlier entry on the branch, branches with and without summaries, a reset leaf, custom entries and
// messages, labels, model and thinking changes. Context edits are left to the named case: OpenClaw
// does not apply them.
function stress(s, seed) {
  let state = (seed + 1) >>> 0;
  const rand = (n) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0; // a 32-bit LCG: exact integer arithmetic
    return (state >>> 8) % n;
  };
  const path = () => s.getBranch().map((e) => e.id);
  for (let step = 0; step < 12 + rand(20); step++) {
    const op = rand(16);
    const onPath = path();
    if (op < 6 || onPath.length < 3) {
      const calls = rand(3) === 0 ? [`c${seed}_${step}`] : [];
      s.appendMessage(user(`q ${seed}.${step}`));
      s.appendMessage(assistant(`a ${seed}.${step}`, calls));
      for (const id of calls) s.appendMessage(result(id, `r ${id}`));
      if (calls.length) s.appendMessage(assistant(`after ${seed}.${step}`));
    } else if (op < 8) {
      s.appendCompaction(`summary ${seed}.${step}`, onPath[rand(onPath.length)], 100 + step);
    } else if (op === 8) {
      s.branchWithSummary(onPath[rand(onPath.length)], `left ${seed}.${step}`);
    } else if (op === 9) {
      s.branch(onPath[rand(onPath.length)]);
    } else if (op === 10 && rand(3) === 0) {
      s.resetLeaf();
    } else if (op === 11) {
      s.appendCustomEntry("ext", { step });
    } else if (op === 12) {
      s.appendCustomMessageEntry("note", `note ${seed}.${step}`, rand(2) === 0);
    } else if (op === 13) {
      s.appendLabelChange(onPath[rand(onPath.length)], `l${step}`);
    } else if (op === 14) {
      s.appendModelChange("p", `m${rand(3)}`);
    } else {
      s.appendThinkingLevelChange(["off", "low", "high"][rand(3)]);
    }
  }
  const onPath = path();
  if (rand(2) === 0 && onPath.length) s.appendCompaction(`final ${seed}`, onPath[rand(onPath.length)], 999);
  s.appendMessage(user(`last ${seed}`)); // a session file exists once it holds a conversation
}

if (mode === "stress") {
  const [count, dir] = rest;
  for (let seed = 0; seed < Number(count); seed++) {
    const s = sm.SessionManager.create("/w", path.join(dir, `stress-${seed}`));
    stress(s, seed);
    console.log(JSON.stringify({ case: `pi-stress-${seed}`, file: s.getSessionFile() }));
  }
} else if (mode === "write") {
  const [dir] = rest;
  for (const [name, build] of Object.entries(cases)) {
    const s = sm.SessionManager.create("/w", path.join(dir, name));
    build(s);
    console.log(JSON.stringify({ case: name, file: s.getSessionFile() }));
  }
} else if (mode === "context") {
  for (const file of rest) {
    try {
      const entries = sm.parseSessionEntries(fs.readFileSync(file, "utf8"));
      sm.migrateSessionEntries(entries);
      const body = entries.filter((e) => e.type !== "session");
      const leaf = body.length ? body[body.length - 1].id : null;
      const { messages, thinkingLevel, model } = sm.buildSessionContext(body, leaf);
      console.log(JSON.stringify({ file, messages, thinkingLevel, model }));
    } catch (error) {
      console.log(JSON.stringify({ file, error: String(error?.stack ?? error) }));
    }
  }
} else {
  console.error("usage: node pi_sessions.mjs <pi-coding-agent dir> (write DIR | context FILE...)");
  process.exit(2);
}
