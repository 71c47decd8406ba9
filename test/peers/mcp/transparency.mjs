// Transparency probe on the MCP TypeScript SDK 1.32.2 Client: one principal
// (TOKEN) against MCP_URL calls the server's `big` tool for each size in
// SIZES (bytes, comma-separated), then makes a plain call of `slow_sum` (no
// task requested; the SDK server runs it as a task of its own) and lists its
// tasks. Prints ONE JSON object:
//   {"big":[{"bytes":n,"ms":t,"len":n}|{"bytes":n,"ms":t,"error":{code,message}}],
//    "plainSum":"sum=3","tasks":[{"taskId","status"}]}
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN=alice SIZES=1048576 node transparency.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const TOKEN = process.env.TOKEN || 'alice';
const SIZES = (process.env.SIZES || '').split(',').filter(Boolean).map(Number);
const opts = { timeout: Number(process.env.REQ_TIMEOUT_MS || 20000) };
const errInfo = (e) => ({ code: typeof e?.code === 'number' ? e.code : null, message: String(e?.message ?? e).replace(/^MCP error -?\d+: /, '') });
const textOf = (r) => (r.content || []).filter(c => c.type === 'text').map(c => c.text).join('');

const out = { big: [] };
const client = new Client({ name: 'warden-transparency', version: '0.0.1' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
try {
  await client.connect(transport, opts);
  for (const bytes of SIZES) {
    const t0 = performance.now();
    try {
      const r = await client.callTool({ name: 'big', arguments: { bytes } }, CallToolResultSchema, opts);
      const text = textOf(r);
      out.big.push({ bytes, ms: Math.round(performance.now() - t0), len: text.length, allX: /^x*$/.test(text) });
    } catch (e) {
      out.big.push({ bytes, ms: Math.round(performance.now() - t0), error: errInfo(e) });
    }
  }
  try {
    out.plainSum = textOf(await client.callTool({ name: 'slow_sum', arguments: { a: 1, b: 2, delay_ms: 200 } }, CallToolResultSchema, opts));
  } catch (e) { out.plainSum = { error: errInfo(e) }; }
  try {
    out.tasks = (await client.experimental.tasks.listTasks(undefined, opts)).tasks.map(t => ({ taskId: t.taskId, status: t.status }));
  } catch (e) { out.tasks = { error: errInfo(e) }; }
  await client.close();
} catch (e) {
  out.fatal = errInfo(e);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
