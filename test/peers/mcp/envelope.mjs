// envelope.mjs reads one JSON text per line (base64) on stdin and prints, per
// line, how the MCP TypeScript SDK reads it: JSON.parse, then the SDK's
// JSONRPCMessageSchema. Used by Warden's differential envelope test.
import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import readline from "node:readline";

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const text = Buffer.from(line, "base64").toString("utf8");
  let out = { ok: false };
  try {
    const v = JSON.parse(text);
    const r = JSONRPCMessageSchema.safeParse(v);
    if (r.success) {
      const m = r.data;
      out = {
        ok: true,
        hasMethod: "method" in m,
        method: typeof m.method === "string" ? m.method : "",
        hasId: "id" in m,
        id: "id" in m ? JSON.stringify(m.id) : "",
        taskId: m.params && typeof m.params.taskId === "string" ? m.params.taskId : "",
      };
    }
  } catch (e) {
    out = { ok: false };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
