"""Drives the kaji binary with the official Claude Agent SDK (Python).

Usage: python3 drive.py SCENARIO
Environment: KAJI_BIN (the binary), KAJI_WORK (the working directory),
KAJI_SDK_OPTIONS (JSON: extra ClaudeAgentOptions fields), KAJI_PROMPT.
Prints one JSON line per message received: the SDK class it arrived as
and the fields the tests check. Exits 3 when the SDK raised.
"""

import asyncio
import dataclasses
import json
import os
import sys

from claude_agent_sdk import ClaudeAgentOptions, query


def describe(message):
    out = {"class": type(message).__name__}
    if dataclasses.is_dataclass(message):
        for f in dataclasses.fields(message):
            value = getattr(message, f.name)
            if f.name == "content" and isinstance(value, list):
                value = [
                    {"class": type(b).__name__, **dataclasses.asdict(b)}
                    for b in value
                ]
            try:
                json.dumps(value)
            except TypeError:
                value = repr(value)
            out[f.name] = value
    return out


async def main():
    extra = json.loads(os.environ.get("KAJI_SDK_OPTIONS", "{}"))
    options = ClaudeAgentOptions(
        cli_path=os.environ["KAJI_BIN"],
        cwd=os.environ["KAJI_WORK"],
        **extra,
    )
    async for message in query(prompt=os.environ["KAJI_PROMPT"], options=options):
        print(json.dumps(describe(message)), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:  # the test reads what the SDK raised
        print(json.dumps({"class": "Raised", "type": type(e).__name__, "text": str(e)}), flush=True)
        sys.exit(3)
