"""Drives the kaji binary with the Python SDK's ClaudeSDKClient: the control
protocol (can_use_tool, SDK MCP servers, agents, hooks, interrupt,
set_permission_mode).

Usage: python3 client.py SCENARIO
Environment as drive.py (KAJI_BIN, KAJI_WORK, KAJI_SDK_OPTIONS,
KAJI_PROMPT). Prints one JSON line per message received (as drive.py) and
one per callback the SDK made (class "Callback"). Exits 3 when the SDK
raised.
"""

import asyncio
import json
import os
import sys

from claude_agent_sdk import (
    AgentDefinition,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    StreamEvent,
    create_sdk_mcp_server,
    tool,
)

from drive import describe


def emit(value):
    print(json.dumps(value), flush=True)


def callback(kind, **fields):
    emit({"class": "Callback", "kind": kind, **fields})


async def can_use_tool(name, tool_input, context):
    callback(
        "can_use_tool",
        tool=name,
        input=tool_input,
        tool_use_id=context.tool_use_id,
        suggestions=len(context.suggestions),
    )
    if name == "Edit":
        return PermissionResultAllow(updated_input={**tool_input, "new_string": "gamma"})
    return PermissionResultDeny(message="no shell for you")


async def allow_all(name, tool_input, context):
    callback("can_use_tool", tool=name, input=tool_input, tool_use_id=context.tool_use_id)
    return PermissionResultAllow()


@tool("add", "Adds two numbers", {"a": int, "b": int})
async def add(args):
    callback("mcp_tool", args=args)
    return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}


async def block_bash(hook_input, tool_use_id, context):
    callback(
        "hook",
        event=hook_input.get("hook_event_name"),
        tool=hook_input.get("tool_name"),
        tool_use_id=tool_use_id,
    )
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "the hook says no",
        }
    }


async def allow_bash(hook_input, tool_use_id, context):
    callback(
        "hook",
        event=hook_input.get("hook_event_name"),
        tool=hook_input.get("tool_name"),
        tool_use_id=tool_use_id,
        input_tool_use_id=hook_input.get("tool_use_id"),
    )
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
        }
    }


async def never_answer(hook_input, tool_use_id, context):
    callback("hook", event=hook_input.get("hook_event_name"), tool_use_id=tool_use_id)
    await asyncio.Event().wait()


def options_for(scenario):
    extra = json.loads(os.environ.get("KAJI_SDK_OPTIONS", "{}"))
    base = dict(cli_path=os.environ["KAJI_BIN"], cwd=os.environ["KAJI_WORK"], **extra)
    if scenario == "permissions":
        base["can_use_tool"] = can_use_tool
    elif scenario == "permissions_allow":
        base["can_use_tool"] = allow_all
    elif scenario == "mcp":
        base["mcp_servers"] = {"calc": create_sdk_mcp_server("calc", tools=[add])}
        base["allowed_tools"] = ["mcp__calc__add"]
    elif scenario == "agents":
        base["agents"] = {
            "reviewer": AgentDefinition(
                description="Reviews code for mistakes.",
                prompt="You are the reviewer sub-agent of this program.",
                tools=["Read", "Glob"],
            )
        }
    elif scenario == "hooks":
        base["hooks"] = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[block_bash])]}
        base["permission_mode"] = "bypassPermissions"
    elif scenario == "hooks_hang":
        base["hooks"] = {
            "PreToolUse": [HookMatcher(matcher="Bash", hooks=[never_answer], timeout=0.2)]
        }
        base["permission_mode"] = "bypassPermissions"
    elif scenario == "hooks_allow":
        base["hooks"] = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[allow_bash])]}
    elif scenario == "client":
        base["include_partial_messages"] = True
    return ClaudeAgentOptions(**base)


async def one_prompt(client, prompt):
    await client.query(prompt)
    async for message in client.receive_response():
        emit(describe(message))


async def multi_turn(client):
    """Turn 1 streams, then is interrupted; turn 2 runs in acceptEdits
    with another model."""
    await client.query("first: hold on")
    interrupted = False
    async for message in client.receive_response():
        emit(describe(message))
        if isinstance(message, StreamEvent) and not interrupted:
            interrupted = True
            await client.interrupt()
            callback("interrupted")
    await client.set_permission_mode("acceptEdits")
    callback("mode_set")
    await client.set_model("scripted-2")
    status = await client.get_mcp_status()
    callback("mcp_status", status=status)
    await one_prompt(client, "second: write c.txt")


async def context(client):
    """One prompt, then the context usage."""
    await one_prompt(client, os.environ["KAJI_PROMPT"])
    callback("context_usage", usage=await client.get_context_usage())


async def status(client, label):
    servers = (await client.get_mcp_status())["mcpServers"]
    callback("mcp_status", label=label, servers={s["name"]: s["status"] for s in servers})


async def mcp_switch(client):
    """Turns kaji's MCP server `everything` off for one prompt, then on
    and restarts it for the next; an unknown server is an error."""
    await client.toggle_mcp_server("everything", False)
    await status(client, "off")
    await one_prompt(client, "first")
    await client.toggle_mcp_server("everything", True)
    await client.reconnect_mcp_server("everything")
    await status(client, "on")
    try:
        await client.reconnect_mcp_server("nope")
        callback("reconnect_nope", error=None)
    except Exception as e:
        callback("reconnect_nope", error=str(e))
    await one_prompt(client, "second")


async def main():
    scenario = sys.argv[1]
    async with ClaudeSDKClient(options=options_for(scenario)) as client:
        if scenario == "client":
            await multi_turn(client)
        elif scenario == "context":
            await context(client)
        elif scenario == "mcp_switch":
            await mcp_switch(client)
        else:
            await one_prompt(client, os.environ["KAJI_PROMPT"])


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:  # the test reads what the SDK raised
        emit({"class": "Raised", "type": type(e).__name__, "text": str(e)})
        sys.exit(3)
