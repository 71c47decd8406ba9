"""Drives an MCP server with the official MCP Python SDK and prints what it
saw as one JSON document: every tool listed and the result of calling each
one that needs no arguments, every resource read, every prompt listed.
Warden's differential test runs it direct and through Warden and compares.

usage: driver.py URL BEARER
"""
import asyncio
import json
import sys

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

SKIP = {"test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"}


def dump(model):
    d = model.model_dump(mode="json", exclude_none=True)
    d.pop("_meta", None)
    d.pop("meta", None)
    return d


async def main(url, bearer):
    out = {}
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer " + bearer}, timeout=30) as hc:
        async with streamable_http_client(url, http_client=hc) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                init = await s.initialize()
                out["server"] = init.server_info.name
                tools = await s.list_tools()
                out["tools"] = sorted(t.name for t in tools.tools)
                calls = {}
                for t in tools.tools:
                    required = (t.input_schema or {}).get("required") or []
                    if required or t.name in SKIP:
                        continue
                    try:
                        r = await asyncio.wait_for(s.call_tool(t.name, {}), 20)
                        calls[t.name] = dump(r)
                    except Exception as e:  # the same error both ways is the same result
                        calls[t.name] = {"error": type(e).__name__}
                out["calls"] = calls
                res = await s.list_resources()
                out["resources"] = {}
                for r in res.resources:
                    rr = await s.read_resource(r.uri)
                    out["resources"][str(r.uri)] = dump(rr)
                prompts = await s.list_prompts()
                out["prompts"] = sorted(p.name for p in prompts.prompts)
    json.dump(out, sys.stdout, sort_keys=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
