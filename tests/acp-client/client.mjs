// An ACP client on the official TypeScript SDK, for kaji's tests.
//
// It starts `$KAJI_BIN acp ...` (arguments: everything after `--` on its
// own command line), runs one scenario, and prints one JSON object on
// stdout: every session/update it received, every permission request and
// the answer it gave, and the responses.
//
// Scenarios (argv[2]):
//   prompt  new session, session/set_mode $ACP_MODE if set, one prompt
//           ($ACP_PROMPT); permission requests are answered in turn from
//           $ACP_ANSWERS (comma-separated option ids)
//   cancel  new session, a prompt, session/cancel once the first agent
//           message chunk has arrived
//   load    session/load of $ACP_SESSION_ID; reports the updates that
//           arrived before the load response
//
// $ACP_CWD is the session's working directory. With $ACP_FS=1 the client
// offers fs/read_text_file and fs/write_text_file: reads answer from the
// buffers in $ACP_BUFFERS (JSON: path -> text), else from the disk; writes
// are recorded (log.writes) and kept in the buffers, never written to disk.
// $ACP_MCP (JSON) is the mcpServers list of session/new and session/load;
// $ACP_IMAGE (base64 PNG) is attached to the prompt as an image block.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const scenario = process.argv[2];
const sep = process.argv.indexOf("--");
const kajiArgs = sep >= 0 ? process.argv.slice(sep + 1) : [];
const cwd = process.env.ACP_CWD;
const answers = (process.env.ACP_ANSWERS ?? "").split(",").filter(Boolean);

const withFs = process.env.ACP_FS === "1";
const buffers = JSON.parse(process.env.ACP_BUFFERS ?? "{}");
const mcpServers = JSON.parse(process.env.ACP_MCP ?? "[]");

const log = { updates: [], permissions: [], responses: {}, reads: [], writes: [] };
let onUpdate = () => {};

const child = spawn(process.env.KAJI_BIN, ["acp", ...kajiArgs], {
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const app = acp
  .client({ name: "kaji-test-client" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    log.updates.push(params);
    onUpdate(params);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const optionId = answers.shift() ?? "reject_once";
    log.permissions.push({ request: params, answer: optionId, updatesBefore: log.updates.length });
    return { outcome: { outcome: "selected", optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    log.reads.push(params.path);
    return { content: buffers[params.path] ?? readFileSync(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    log.writes.push({ path: params.path, content: params.content });
    buffers[params.path] = params.content;
    return {};
  });

async function initialize(ctx) {
  log.responses.initialize = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: withFs ? { fs: { readTextFile: true, writeTextFile: true } } : {},
  });
}

async function newSession(ctx) {
  const r = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers });
  log.responses.new = r;
  return r.sessionId;
}

const prompt = (ctx, sessionId, text) =>
  ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [
      { type: "text", text },
      ...(process.env.ACP_IMAGE
        ? [{ type: "image", mimeType: "image/png", data: process.env.ACP_IMAGE }]
        : []),
    ],
  });

const scenarios = {
  async prompt(ctx) {
    await initialize(ctx);
    const sessionId = await newSession(ctx);
    if (process.env.ACP_MODE) {
      log.responses.setMode = await ctx.request(acp.methods.agent.session.setMode, {
        sessionId,
        modeId: process.env.ACP_MODE,
      });
    }
    log.responses.prompt = await prompt(ctx, sessionId, process.env.ACP_PROMPT ?? "hello");
  },
  async cancel(ctx) {
    await initialize(ctx);
    const sessionId = await newSession(ctx);
    let cancelled = false;
    onUpdate = (u) => {
      if (!cancelled && u.update.sessionUpdate === "agent_message_chunk") {
        cancelled = true;
        ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      }
    };
    log.responses.prompt = await prompt(ctx, sessionId, process.env.ACP_PROMPT ?? "hello");
  },
  async twoTurns(ctx) {
    await initialize(ctx);
    const sessionId = await newSession(ctx);
    log.responses.prompt = await prompt(ctx, sessionId, process.env.ACP_PROMPT ?? "hello");
    log.responses.prompt2 = await prompt(ctx, sessionId, process.env.ACP_PROMPT2 ?? "again");
  },
  async list(ctx) {
    await initialize(ctx);
    const sessionId = await newSession(ctx);
    log.responses.prompt = await prompt(ctx, sessionId, process.env.ACP_PROMPT ?? "hello");
    log.responses.list = await ctx.request(acp.methods.agent.session.list, { cwd });
    log.responses.listAll = await ctx.request(acp.methods.agent.session.list, {});
  },
  async load(ctx) {
    await initialize(ctx);
    log.responses.load = await ctx.request(acp.methods.agent.session.load, {
      sessionId: process.env.ACP_SESSION_ID,
      cwd,
      mcpServers,
    });
    log.updatesBeforeLoad = log.updates.length;
  },
};

let code = 0;
try {
  await app.connectWith(stream, scenarios[scenario]);
} catch (e) {
  log.error = { message: String(e?.message ?? e), code: e?.code, data: e?.data };
  code = 1;
}
child.stdin.end();
const exit =
  child.exitCode ?? (await new Promise((resolve) => child.on("exit", (c) => resolve(c))));
log.agentExit = exit;
process.stdout.write(JSON.stringify(log) + "\n");
process.exit(code);
