"""Reads one base64 JSON text per line on stdin and prints, per line, how the
MCP Python SDK reads it (json.loads, then mcp_types.JSONRPCMessage): the same
fields as test/peers/mcp/envelope.mjs prints for the TypeScript SDK."""
import base64
import json
import sys

import mcp_types as t
from pydantic import TypeAdapter

adapter = TypeAdapter(t.JSONRPCMessage)
for line in sys.stdin:
    out = {"ok": False}
    try:
        text = base64.b64decode(line.strip()).decode("utf-8")
        m = adapter.validate_python(json.loads(text))
        has_method = isinstance(m, (t.JSONRPCRequest, t.JSONRPCNotification))
        has_id = hasattr(m, "id") and not isinstance(m, t.JSONRPCNotification)
        params = getattr(m, "params", None) or {}
        task_id = params.get("taskId") if isinstance(params, dict) else None
        out = {
            "ok": True,
            "hasMethod": has_method,
            "method": m.method if has_method else "",
            "hasId": has_id,
            "id": json.dumps(m.id) if has_id else "",
            "taskId": task_id if isinstance(task_id, str) else "",
        }
    except Exception:
        out = {"ok": False}
    sys.stdout.write(json.dumps(out) + "\n")
