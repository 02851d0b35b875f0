// The model context OpenClaw 2026.9 itself rebuilds from a transcript: the oracle of the differential test.
//
//   node openclaw_context.mjs <openclaw/dist> FILE.jsonl...
//
// Prints one JSON line per file: {file, messages, thinkingLevel, model} or {file, error}. It runs the
// host's own code, the path readSessionTranscriptModelContext takes: parse and migrate the JSONL like
// the session codec, scan the transcript tree, select the leaf's path with its normalized parents,
// normalize compaction/reset boundaries, then buildSessionContext. The bundle's chunk names are
// hashed, so each module is found by its `//#region` source marker and each function by the name it
// is exported under.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dist, ...files] = process.argv.slice(2);

function findChunk(prefix, region) {
  const marker = `//#region ${region}\n`;
  for (const name of fs.readdirSync(dist)) {
    if (!name.startsWith(prefix) || !name.endsWith(".mjs")) continue;
    const text = fs.readFileSync(path.join(dist, name), "utf8");
    if (text.includes(marker)) return { file: path.join(dist, name), text };
  }
  throw new Error(`no chunk ${prefix}* holds ${region} in ${dist}`);
}

async function load(prefix, region, names) {
  const { file, text } = findChunk(prefix, region);
  const line = text.match(/^export \{([^}]*)\};?$/m);
  if (!line) throw new Error(`${file} has no export list`);
  const alias = new Map(
    line[1].split(",").map((part) => {
      const [local, as] = part.trim().split(/\s+as\s+/);
      return [local, as ?? local];
    }),
  );
  const module = await import(pathToFileURL(file).href);
  return Object.fromEntries(
    names.map((name) => {
      const fn = module[alias.get(name)];
      if (typeof fn !== "function") throw new Error(`${file} does not export ${name}`);
      return [name, fn];
    }),
  );
}

const tree = await load("transcript-tree-", "src/config/sessions/transcript-tree.ts", [
  "scanSessionTranscriptTree",
  "selectSessionTranscriptTreePathNodes",
]);
const navigation = await load("session-entry-navigation-", "src/config/sessions/session-entry-navigation.ts", [
  "normalizeSessionContextEntryBoundaries",
]);
const session = await load("session-", "packages/agent-core/src/harness/session/session.ts", ["buildSessionContext"]);
const codec = await load("session-manager-codec-", "src/agents/sessions/session-manager-codec.ts", [
  "parseSessionEntries",
  "migrateSessionEntries",
]);

for (const file of files) {
  try {
    const entries = codec.parseSessionEntries(fs.readFileSync(file, "utf8"));
    codec.migrateSessionEntries(entries);
    const scanned = tree.scanSessionTranscriptTree(entries);
    const selected = tree
      .selectSessionTranscriptTreePathNodes(scanned, scanned.leafId)
      .map(({ entry, parentId }) => ({ ...entry, parentId }));
    const context = session.buildSessionContext(navigation.normalizeSessionContextEntryBoundaries(selected, scanned.nodes));
    console.log(JSON.stringify({ file, ...context }));
  } catch (error) {
    console.log(JSON.stringify({ file, error: String(error?.stack ?? error) }));
  }
}
