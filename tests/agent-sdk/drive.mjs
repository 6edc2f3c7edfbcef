// Drives the kaji binary with the official Claude Agent SDK for TypeScript
// (installed by .ci/run: npm ci --omit=optional --prefix tests/agent-sdk).
//
// Usage: node drive.mjs SCENARIO   (query | permissions | mcp | hooks | hooks_allow)
// Environment as drive.py: KAJI_BIN, KAJI_WORK, KAJI_SDK_OPTIONS (JSON:
// extra options), KAJI_PROMPT. Prints one JSON line per message received,
// shaped like drive.py's (`class`, `content`, `data` for system messages),
// and one per callback the SDK made (class "Callback"). Exits 3 when the
// SDK threw.

import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const emit = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const callback = (kind, fields) => emit({ class: "Callback", kind, ...fields });

const CLASSES = {
  system: "SystemMessage",
  assistant: "AssistantMessage",
  user: "UserMessage",
  result: "ResultMessage",
  stream_event: "StreamEvent",
};

function describe(message) {
  const out = { class: CLASSES[message.type] ?? message.type, ...message };
  if (message.type === "assistant" || message.type === "user") {
    out.content = message.message?.content;
  }
  if (message.type === "system") {
    out.data = message;
  }
  return out;
}

function optionsFor(scenario) {
  const extra = JSON.parse(process.env.KAJI_SDK_OPTIONS ?? "{}");
  const options = {
    pathToClaudeCodeExecutable: process.env.KAJI_BIN,
    cwd: process.env.KAJI_WORK,
    ...extra,
  };
  if (scenario === "permissions") {
    options.canUseTool = async (toolName, input, { toolUseID, suggestions }) => {
      callback("can_use_tool", {
        tool: toolName,
        input,
        tool_use_id: toolUseID,
        suggestions: (suggestions ?? []).length,
      });
      if (toolName === "Edit") {
        return { behavior: "allow", updatedInput: { ...input, new_string: "gamma" } };
      }
      return { behavior: "deny", message: "no shell for you" };
    };
  } else if (scenario === "mcp") {
    const add = tool("add", "Adds two numbers", { a: z.number(), b: z.number() }, async (args) => {
      callback("mcp_tool", { args });
      return { content: [{ type: "text", text: String(args.a + args.b) }] };
    });
    options.mcpServers = { calc: createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [add] }) };
    options.allowedTools = ["mcp__calc__add"];
  } else if (scenario === "hooks" || scenario === "hooks_allow") {
    const decision = scenario === "hooks" ? "deny" : "allow";
    const hook = async (input, toolUseID) => {
      callback("hook", {
        event: input.hook_event_name,
        tool: input.tool_name,
        tool_use_id: toolUseID,
        input_tool_use_id: input.tool_use_id,
      });
      return {
        hookSpecificOutput: {
          hookEventName: "PreToolUse",
          permissionDecision: decision,
          permissionDecisionReason: "the hook says no",
        },
      };
    };
    options.hooks = { PreToolUse: [{ matcher: "Bash", hooks: [hook] }] };
    if (scenario === "hooks") {
      options.permissionMode = "bypassPermissions";
      options.allowDangerouslySkipPermissions = true;
    }
  }
  return options;
}

async function main() {
  const scenario = process.argv[2];
  const prompt = process.env.KAJI_PROMPT;
  for await (const message of query({ prompt, options: optionsFor(scenario) })) {
    emit(describe(message));
  }
}

main().catch((e) => {
  emit({ class: "Raised", type: e?.constructor?.name ?? "Error", text: String(e?.message ?? e) });
  process.exit(3);
});
