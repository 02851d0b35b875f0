// OpenClaw context-engine plugin: forwards the host's context-engine calls to `openclaw-ctx serve`
// (newline-delimited JSON-RPC 2.0 on stdio, docs/serve.md). Plain JavaScript, no build step.
//
// One serve process per host process, started lazily on the first engine call, restarted on the next
// call after it dies. Engine instances are per operation (the host disposes them after each); the
// serve client below lives as long as this module.

import { AsyncLocalStorage, AsyncResource } from "node:async_hooks";
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

// The host runs each operation in an async work scope (AsyncLocalStorage) that closes with the
// operation. serve outlives operations, so its pipes' events are bound to the module's own context,
// never to the operation that happened to start it; a server request runs in the context of the call
// in flight (see llmStack).
const DETACHED = new AsyncResource("openclaw-ctx.serve");

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MANIFEST = JSON.parse(readFileSync(path.join(HERE, "openclaw.plugin.json"), "utf8"));
const PKG = JSON.parse(readFileSync(path.join(HERE, "package.json"), "utf8"));

export const PLUGIN_ID = MANIFEST.id;
export const PROTOCOL_VERSION = 1;

/** Hooks forwarded by their wire name (docs/serve.md). `dispose` is never forwarded. */
export const HOOKS = [
  "bootstrap",
  "maintain",
  "assemble",
  "commitTurn",
  "ingest",
  "ingestBatch",
  "afterTurn",
  "compact",
  "prepareSubagentSpawn",
  "onSubagentEnded",
];

const DEFAULTS = {
  engine: "lossless-claw",
  timeoutMs: 60_000,
  compactTimeoutMs: 600_000,
  startTimeoutMs: 60_000,
};

// At most this many restarts inside RESTART_WINDOW_MS; past that calls fail fast until the window
// slides, so a serve that crashes on start cannot spin the host.
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

export class ServeError extends Error {
  constructor(message, { code, data, method } = {}) {
    super(message);
    this.name = "ServeError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

// ---------------------------------------------------------------------------------------------
// What cannot cross JSON
// ---------------------------------------------------------------------------------------------

function isAbortSignal(v) {
  return typeof AbortSignal !== "undefined" && v instanceof AbortSignal;
}

/**
 * A JSON-safe copy of `value`: a Set becomes an array, a Map an object, a Date its ISO string, a
 * BigInt its decimal string; functions, AbortSignals, symbols, undefined, binary buffers and
 * cycles are dropped.
 */
export function toWire(value, seen = new WeakSet()) {
  if (value === null) return null;
  const t = typeof value;
  if (t === "string" || t === "boolean") return value;
  if (t === "number") return Number.isFinite(value) ? value : null;
  if (t === "bigint") return value.toString();
  if (t === "function" || t === "symbol" || t === "undefined") return undefined;
  if (isAbortSignal(value)) return undefined;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return undefined;
  if (seen.has(value)) return undefined;
  seen.add(value);
  try {
    if (value instanceof Set || Array.isArray(value)) {
      const out = [];
      for (const item of value) {
        const w = toWire(item, seen);
        out.push(w === undefined ? null : w);
      }
      return value instanceof Set ? out.filter((x) => x !== null) : out;
    }
    if (value instanceof Map) {
      const out = {};
      for (const [k, v] of value) {
        const w = toWire(v, seen);
        if (w !== undefined) out[String(k)] = w;
      }
      return out;
    }
    if (typeof value.toJSON === "function") return toWire(value.toJSON(), seen);
    const out = {};
    for (const k of Object.keys(value)) {
      const w = toWire(value[k], seen);
      if (w !== undefined) out[k] = w;
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

/**
 * The params of a hook as they go on the wire: `abortSignal` out, the rest through toWire.
 * `runtimeContext.config` (25-30 KB, the user's provider API keys inside) never leaves the host
 * process: serve drops it on arrival anyway (docs/serve.md), and nothing in it is the engine's.
 */
export function hookParams(params) {
  if (params === null || typeof params !== "object") return {};
  const { abortSignal: _signal, ...rest } = params;
  if (rest.runtimeContext && typeof rest.runtimeContext === "object") {
    const { config: _config, ...runtimeContext } = rest.runtimeContext;
    rest.runtimeContext = runtimeContext;
  }
  return toWire(rest) ?? {};
}

function sessionOf(params) {
  return params?.sessionKey ?? params?.sessionTarget?.sessionKey ?? params?.sessionId ?? null;
}

function roughTokens(messages) {
  try {
    return Math.ceil(JSON.stringify(toWire(messages) ?? []).length / 4);
  } catch {
    return 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

function expandHome(p) {
  if (typeof p !== "string" || !p) return p;
  return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}

export function resolveConfig(pluginConfig = {}) {
  const c = { ...DEFAULTS, ...(pluginConfig ?? {}) };
  if (c.engine !== "lossless-claw" && c.engine !== "legacy") {
    throw new Error(`${PLUGIN_ID}: config.engine must be "lossless-claw" or "legacy", not ${JSON.stringify(c.engine)}`);
  }
  let command = c.pythonCommand ?? process.env.OPENCLAW_CTX_COMMAND ?? "openclaw-ctx";
  if (typeof command === "string") command = command.trim().split(/\s+/);
  if (!Array.isArray(command) || command.length === 0) throw new Error(`${PLUGIN_ID}: config.pythonCommand is empty`);
  return {
    ...c,
    pythonCommand: command.map(String),
    dbPath: expandHome(c.dbPath),
    configPath: expandHome(c.configPath),
    logFile: expandHome(c.logFile),
    traceFile: expandHome(c.traceFile),
  };
}

/** The serve command line: `<python command> [--db P] [--config F] serve --engine E [--summarizer S]`. */
export function serveArgv(config) {
  const argv = [...config.pythonCommand];
  if (config.dbPath) argv.push("--db", config.dbPath);
  if (config.configPath) argv.push("--config", config.configPath);
  argv.push("serve", "--engine", config.engine);
  if (config.summarizer) argv.push("--summarizer", config.summarizer);
  return argv;
}

// ---------------------------------------------------------------------------------------------
// The serve client
// ---------------------------------------------------------------------------------------------

export class ServeClient {
  /**
   * @param {object} config resolved config (resolveConfig)
   * @param {{logger?: object, hostVersion?: string, hostLlm?: () => Function|undefined, env?: object}} opts
   */
  constructor(config, opts = {}) {
    this.config = config;
    this.logger = opts.logger ?? console;
    this.hostVersion = opts.hostVersion;
    this.env = opts.env ?? process.env;
    this.fallbackLlm = opts.hostLlm ?? (() => undefined);
    this.child = null;
    this.starting = null;
    this.info = null;
    this.hooks = null; // the hooks serve's engine implements (initialize's `hooks`); null until started
    this.serverInfo = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, timer, method}
    this.restarts = []; // start times, for the restart budget
    this.starts = 0;
    this.llmStack = []; // llm.complete functions of calls in flight, newest last
    this.lastLlm = undefined;
    this.stats = { calls: 0, errors: 0, restarts: 0, firstStartMs: null };
    this._onExit = () => this.close();
    process.once("exit", this._onExit);
  }

  get hostLlm() {
    return this.config.summarizer === "host";
  }

  log(level, msg) {
    const fn = this.logger?.[level] ?? this.logger?.info;
    try {
      fn?.call(this.logger, `[${PLUGIN_ID}] ${msg}`);
    } catch {
      // a logger that throws must not break a call
    }
  }

  /** Starts serve (once; again after it died) and resolves with the initialize result. */
  ensureStarted() {
    if (this.child && this.serverInfo) return Promise.resolve(this.serverInfo);
    if (this.starting) return this.starting;
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    if (this.restarts.length >= MAX_RESTARTS) {
      return Promise.reject(
        new ServeError(`openclaw-ctx serve died ${MAX_RESTARTS} times in ${RESTART_WINDOW_MS / 1000}s; not restarting yet`),
      );
    }
    this.restarts.push(now);
    this.starting = this._start().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  async _start() {
    const argv = serveArgv(this.config);
    const t0 = Date.now();
    if (this.starts > 0) {
      this.stats.restarts += 1;
      this.log("warn", `restarting openclaw-ctx serve (start #${this.starts + 1})`);
    }
    this.starts += 1;
    let child;
    let spawnError;
    try {
      DETACHED.runInAsyncScope(() => {
        child = spawn(argv[0], argv.slice(1), {
          stdio: ["pipe", "pipe", "pipe"],
          env: { ...this.env, PYTHONUNBUFFERED: "1" },
        });
        spawnError = new Promise((_, reject) => {
          child.once("error", (err) => reject(new ServeError(`cannot start ${argv.join(" ")}: ${err.message}`)));
        });
        child.on("exit", (code, signal) => this._onChildExit(child, code, signal));
        child.stdin.on("error", () => {}); // EPIPE after the child died; the exit handler reports it
        createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => this._onLine(line));
        createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", (line) => this._onStderr(line));
      });
    } catch (err) {
      throw new ServeError(`cannot start ${argv.join(" ")}: ${err.message}`);
    }
    spawnError.catch(() => {});
    this.child = child;
    this._idle(true);
    const init = {
      protocolVersion: PROTOCOL_VERSION,
      engine: this.config.engine,
      hostLlm: this.hostLlm,
    };
    if (this.hostVersion) init.hostVersion = this.hostVersion;
    if (this.config.engineConfig) init.engineConfig = this.config.engineConfig;
    const result = await Promise.race([
      this._request("initialize", init, this.config.startTimeoutMs, null, child),
      spawnError,
    ]);
    if (!result || result.protocolVersion !== PROTOCOL_VERSION) {
      this._kill(child);
      throw new ServeError(`openclaw-ctx serve speaks protocol ${result?.protocolVersion}, not ${PROTOCOL_VERSION}`);
    }
    const ms = Date.now() - t0;
    if (this.stats.firstStartMs === null) this.stats.firstStartMs = ms;
    this.serverInfo = result;
    this.info = result.engine ?? null;
    this.hooks = Array.isArray(result.hooks) ? result.hooks : null;
    this._traceLine({ t: Date.now(), method: "initialize", ms, rpcMs: ms, ok: true, pid: result.pid, start: this.starts });
    this.log("info", `openclaw-ctx serve pid ${result.pid} ready in ${ms} ms (engine ${this.config.engine})`);
    return result;
  }

  _kill(child) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }

  // Between calls the child and its pipes must not keep the host process alive.
  _idle(idle) {
    const c = this.child;
    if (!c) return;
    for (const s of [c, c.stdin, c.stdout, c.stderr]) {
      try {
        if (idle) s?.unref?.();
        else s?.ref?.();
      } catch {
        // not every stream supports ref/unref
      }
    }
  }

  _onChildExit(child, code, signal) {
    if (this.child !== child) return;
    this.child = null;
    this.serverInfo = null;
    const why = signal ? `signal ${signal}` : `exit code ${code}`;
    this.log("warn", `openclaw-ctx serve exited (${why}); the next call restarts it`);
    for (const [id, p] of this.pending) {
      if (p.child !== child) continue;
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new ServeError(`openclaw-ctx serve exited (${why}) during ${p.method}`, { method: p.method }));
    }
  }

  _onStderr(line) {
    if (this.config.logFile) {
      try {
        appendFileSync(this.config.logFile, line + "\n");
      } catch {
        // the log file is best effort
      }
    }
    this.log("debug", `serve: ${line}`);
  }

  _write(child, msg) {
    if (!child || child.stdin.destroyed) throw new ServeError("openclaw-ctx serve is not running");
    child.stdin.write(JSON.stringify(msg) + "\n");
  }

  _onLine(line) {
    if (!line.trim()) return;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      this.log("warn", `serve wrote a non-JSON line to stdout: ${line.slice(0, 200)}`);
      return;
    }
    if (msg && typeof msg.method === "string") {
      if (msg.id !== undefined && msg.id !== null) void this._onServerRequest(msg);
      return; // server notifications: none defined yet
    }
    const p = this.pending.get(msg?.id);
    if (!p) return; // late answer to a cancelled or timed-out call
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    this._afterCall();
    if (msg.error) {
      const e = msg.error;
      const detail = e.data?.kind ? `${e.data.kind}` : "";
      p.reject(new ServeError(`${p.method}: ${e.message}${detail ? ` (${detail})` : ""}`, { ...e, method: p.method }));
    } else {
      p.resolve(msg.result);
    }
  }

  _afterCall() {
    if (this.pending.size === 0) this._idle(true);
  }

  async _onServerRequest(msg) {
    const child = this.child;
    const reply = (body) => {
      try {
        this._write(child, { jsonrpc: "2.0", id: msg.id, ...body });
      } catch {
        // serve died meanwhile
      }
    };
    if (msg.method !== "host/llmComplete") {
      reply({ error: { code: -32601, message: `unknown method ${msg.method}` } });
      return;
    }
    // The host binds llm.complete to one call (its async scope closes with the call), so the calls in
    // flight come first, newest first; then the plugin runtime's process-wide llm.complete; then the
    // last one seen, which may be closed by now.
    const seen = new Set();
    const candidates = [...this.llmStack]
      .reverse()
      .concat([{ complete: this.fallbackLlm(), run: (f) => f() }, this.lastLlm])
      .filter((c) => c && typeof c.complete === "function" && !seen.has(c.complete) && seen.add(c.complete));
    if (candidates.length === 0) {
      reply({ error: { code: -32000, message: "the host offered no llm.complete" } });
      return;
    }
    const p = msg.params ?? {};
    const req = { messages: [{ role: "user", content: String(p.prompt ?? "") }], purpose: `${PLUGIN_ID} summary` };
    if (p.system) req.systemPrompt = String(p.system);
    if (Number.isFinite(p.maxTokens)) req.maxTokens = p.maxTokens;
    const errors = [];
    for (const { complete, run } of candidates) {
      try {
        const out = await run(() => complete(req));
        reply({ result: { text: String(out?.text ?? "") } });
        return;
      } catch (err) {
        errors.push(String(err?.message ?? err));
      }
    }
    reply({ error: { code: -32000, message: `host llm.complete failed: ${errors.join("; ")}` } });
  }

  _request(method, params, timeoutMs, signal, child = this.child) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      if (signal?.aborted) {
        reject(abortError(method));
        return;
      }
      const p = { resolve, reject, method, child, timer: null };
      let onAbort = null;
      const done = (fn) => (v) => {
        if (onAbort) signal.removeEventListener("abort", onAbort);
        fn(v);
      };
      p.resolve = done(resolve);
      p.reject = done(reject);
      p.timer = setTimeout(() => {
        if (!this.pending.delete(id)) return;
        this._cancel(child, id);
        this._afterCall();
        p.reject(new ServeError(`${method} timed out after ${timeoutMs} ms`, { code: -32800, method }));
      }, timeoutMs);
      if (signal) {
        onAbort = () => {
          if (!this.pending.delete(id)) return;
          clearTimeout(p.timer);
          this._cancel(child, id);
          this._afterCall();
          p.reject(abortError(method));
        };
        signal.addEventListener("abort", onAbort, { once: true });
      }
      this.pending.set(id, p);
      this._idle(false);
      try {
        this._write(child, { jsonrpc: "2.0", id, method, params });
      } catch (err) {
        this.pending.delete(id);
        clearTimeout(p.timer);
        this._afterCall();
        p.reject(err);
      }
    });
  }

  _cancel(child, id) {
    try {
      this._write(child, { jsonrpc: "2.0", method: "$/cancel", params: { id } });
    } catch {
      // nothing to cancel in a dead process
    }
  }

  /** One hook call: starts serve if needed, converts params, tracks the host's llm.complete. */
  async call(method, params) {
    this.stats.calls += 1;
    const llm = params?.runtimeContext?.llm?.complete;
    // The function and the async context it belongs to (the host's work scope for this call).
    const boundLlm =
      typeof llm === "function"
        ? { complete: llm.bind(params.runtimeContext.llm), run: AsyncLocalStorage.snapshot() }
        : undefined;
    if (boundLlm) {
      this.lastLlm = boundLlm;
      this.llmStack.push(boundLlm);
    }
    const t0 = performance.now();
    let wire;
    let ok = false;
    try {
      await this.ensureStarted();
      const timeout = method === "compact" ? this.config.compactTimeoutMs : this.config.timeoutMs;
      wire = hookParams(params);
      const started = performance.now();
      const result = await this._request(method, wire, timeout, params?.abortSignal ?? null);
      ok = true;
      this._trace(method, params, wire, t0, started, ok);
      return result;
    } catch (err) {
      this.stats.errors += 1;
      this._trace(method, params, wire, t0, null, ok, err);
      throw err;
    } finally {
      if (boundLlm) {
        const i = this.llmStack.lastIndexOf(boundLlm);
        if (i >= 0) this.llmStack.splice(i, 1);
      }
    }
  }

  _trace(method, params, wire, t0, started, ok, err) {
    if (!this.config.traceFile) return;
    const end = performance.now();
    const rec = {
      t: Date.now(),
      method,
      session: sessionOf(params),
      ms: Math.round((end - t0) * 1000) / 1000,
      rpcMs: started === null ? null : Math.round((end - started) * 1000) / 1000,
      ok,
      pid: this.serverInfo?.pid ?? null,
      hostLlm: typeof params?.runtimeContext?.llm?.complete === "function",
    };
    if (err) rec.error = { message: String(err.message ?? err), code: err.code ?? null };
    if (method === "commitTurn" && wire) rec.params = wire;
    if (method === "bootstrap") rec.where = { sessionFile: params?.sessionFile, sessionTarget: params?.sessionTarget };
    this._traceLine(rec);
  }

  _traceLine(rec) {
    if (!this.config.traceFile) return;
    try {
      appendFileSync(this.config.traceFile, JSON.stringify(rec) + "\n");
    } catch {
      // tracing is best effort
    }
  }

  /** Graceful: `shutdown`, then EOF. Used at host exit (synchronously: EOF only). */
  close() {
    process.removeListener("exit", this._onExit);
    const c = this.child;
    this.child = null;
    this.serverInfo = null;
    if (c) {
      try {
        c.stdin.end();
      } catch {
        // gone
      }
    }
  }

  async shutdown(timeoutMs = 10_000) {
    const c = this.child;
    if (!c) return;
    try {
      await this._request("shutdown", {}, timeoutMs, null, c);
    } catch {
      // it exits on EOF regardless
    }
    this.close();
  }
}

function abortError(method) {
  const err = new ServeError(`${method} was aborted`, { code: -32800, method });
  err.name = "AbortError";
  return err;
}

// ---------------------------------------------------------------------------------------------
// The engine the host sees
// ---------------------------------------------------------------------------------------------

/** The host-facing info: the server's EngineInfo, with the plugin's id (the gateway requires it). */
export function engineInfo(serverEngine, config) {
  const base = serverEngine && typeof serverEngine === "object" ? { ...serverEngine } : {};
  const info = {
    ...base,
    id: PLUGIN_ID,
    name: `openclaw-ctx ${base.name ?? config.engine}`,
    version: base.version ?? PKG.version,
  };
  return info;
}

export function createEngine(client) {
  const engine = {
    info: engineInfo(client.info, client.config),
    async dispose() {
      // Engine objects are per operation; serve keeps one engine for its whole life.
    },
  };
  // Only the hooks the engine implements: the host treats a missing method as "not supported",
  // while a method that answers "no such hook" would quarantine the engine.
  const served = new Set(client.hooks ?? HOOKS);
  for (const hook of HOOKS) {
    if (served.has(hook)) engine[hook] = (params) => client.call(hook, params);
  }
  engine.assemble = async (params) => {
    try {
      return await client.call("assemble", params);
    } catch (err) {
      client.log("warn", `assemble failed, using the host's messages for this turn: ${err.message}`);
      const messages = Array.isArray(params?.messages) ? params.messages : [];
      return { messages, estimatedTokens: roughTokens(messages) };
    }
  };
  if (served.has("prepareSubagentSpawn")) {
    engine.prepareSubagentSpawn = async (params) => {
      const result = await client.call("prepareSubagentSpawn", params);
      if (result === null || result === undefined) return undefined;
      // A function cannot cross JSON: serve holds the engine's rollback under rollbackId.
      const answer = typeof result === "object" ? result : {};
      const { rollbackId, ...rest } = answer;
      const childSessionKey = params?.childSessionKey;
      const rollback = async () => {
        if (typeof rollbackId === "string") await client.call("rollbackSubagentSpawn", { rollbackId, childSessionKey });
      };
      return { ...rest, rollback };
    };
  }
  return engine;
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

const clients = new Map(); // JSON of the resolved config -> ServeClient (one serve per config per process)

export function clientFor(config, opts) {
  const key = JSON.stringify(config);
  let c = clients.get(key);
  if (!c) {
    c = new ServeClient(config, opts);
    clients.set(key, c);
  }
  return c;
}

/** The serve clients of this process (for tests and diagnostics). */
export function serveClients() {
  return [...clients.values()];
}

function hostVersionOf(api) {
  return api?.runtime?.version ?? api?.config?.meta?.lastTouchedVersion ?? undefined;
}

export function register(api) {
  const config = resolveConfig(api.pluginConfig ?? {});
  const client = clientFor(config, {
    logger: api.logger,
    hostVersion: typeof hostVersionOf(api) === "string" ? hostVersionOf(api) : undefined,
    hostLlm: () => {
      const c = api?.runtime?.llm?.complete;
      return typeof c === "function" ? c.bind(api.runtime.llm) : undefined;
    },
  });
  api.registerContextEngine(PLUGIN_ID, async () => {
    // The info (transcriptSemantics, acceptedHostParams, ownsCompaction) is the server's own, so the
    // first operation starts serve. If it cannot start, the engine still answers: assemble falls back
    // to the host's messages, the other hooks surface the error.
    try {
      await client.ensureStarted();
    } catch (err) {
      client.log("error", `openclaw-ctx serve is not available: ${err.message}`);
    }
    return createEngine(client);
  });
}

export default {
  id: PLUGIN_ID,
  name: MANIFEST.name,
  description: MANIFEST.description,
  kind: MANIFEST.kind,
  register,
};
