// Drives plugins/openclaw/index.js against tests/openclaw_host/fake_serve.py with a fake host API and
// prints one JSON object of observations (tests/openclaw_host/test_plugin_js.py asserts on it).
import { pathToFileURL } from "node:url";

const [pluginIndex, python, fakeServe] = process.argv.slice(2);
const plugin = (await import(pathToFileURL(pluginIndex).href)).default;
const out = {};
const logs = [];
const logger = Object.fromEntries(["debug", "info", "warn", "error"].map((l) => [l, (m) => logs.push(`${l}: ${m}`)]));

let factory = null;
plugin.register({
  pluginConfig: { engine: "lossless-claw", pythonCommand: [python, fakeServe], dbPath: "/nonexistent/x.db", summarizer: "host", timeoutMs: 2000 },
  logger,
  runtime: {},
  registerContextEngine(id, f) {
    out.registeredId = id;
    factory = f;
  },
});
out.pluginId = plugin.id;
const engine = await factory({});
out.info = engine.info;
out.hooks = Object.keys(engine).filter((k) => typeof engine[k] === "function").sort();

const llmCalls = [];
const runtimeContext = {
  config: { models: { providers: { x: { apiKey: "sk-planted" } } } },
  llm: { complete: async (req) => { llmCalls.push(req); return { text: "host says hi" }; } },
  rewriteTranscriptEntries: async () => ({}),
  transcriptStorage: { kind: "sqlite" },
};
const ac = new AbortController();
out.assemble = await engine.assemble({
  sessionId: "sid-1", sessionKey: "agent:main:k1", messages: [{ role: "user", content: "hi" }],
  availableTools: new Set(["read", "exec"]), runtimeContext, abortSignal: ac.signal, when: new Date(0), big: 10n,
});
out.assembleFallback = await engine.assemble({ sessionId: "sid-1", sessionKey: "agent:main:k1", prompt: "fail", messages: [{ role: "user", content: "keep me" }] });
try { await engine.maintain({ sessionId: "sid-1", prompt: "fail" }); out.maintainError = null; } catch (e) { out.maintainError = { name: e.name, message: e.message, code: e.code }; }
out.compact = await engine.compact({ sessionId: "sid-1", sessionKey: "agent:main:k1", runtimeContext });
out.llmCalls = llmCalls;
const prepared = await engine.prepareSubagentSpawn({ parentSessionKey: "agent:main:k1", childSessionKey: "agent:main:sub" });
out.spawnKeys = Object.keys(prepared).filter((k) => k !== "echo" && k !== "params").sort();
await prepared.rollback();

const ac2 = new AbortController();
setTimeout(() => ac2.abort(), 150);
try { await engine.maintain({ sessionId: "sid-1", sessionKey: "agent:main:k1", prompt: "hang", abortSignal: ac2.signal }); out.abort = "resolved"; } catch (e) { out.abort = { name: e.name, code: e.code }; }
try { await engine.maintain({ sessionId: "sid-2", prompt: "hang" }); out.timeout = "resolved"; } catch (e) { out.timeout = { message: e.message, code: e.code }; }

// Kill serve between two calls: the next call restarts it and succeeds.
const { serveClients } = await import(pathToFileURL(pluginIndex).href);
const [client] = serveClients();
out.afterTimeout = (await engine.ingest({ sessionId: "sid-3", message: { role: "user", content: "x" } }))?.echo ?? null;
out.pidBefore = client.serverInfo?.pid ?? null;
process.kill(out.pidBefore, "SIGKILL");
await new Promise((r) => setTimeout(r, 300));
out.childAfterKill = client.child === null;
out.afterKill = (await engine.bootstrap({ sessionId: "sid-1", sessionFile: "k" }))?.echo ?? null;
out.pidAfter = client.serverInfo?.pid ?? null;
out.stats = client.stats;
out.logs = logs;
await client.shutdown();
process.stdout.write(JSON.stringify(out) + "\n");
