// The MCP TypeScript SDK 1.32.2 Client runs server.mjs's ask_in_task tool as
// a task (callToolStream) and answers the elicitation the task sends it
// (related-task metadata, delivered on the client's tasks/result). Prints
// ONE JSON object: the stream's message types and the result's text, or
// the error.
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN=alice node ask_in_task.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const out = { types: [], elicited: null };
const deadline = setTimeout(() => {
  out.fatal = 'run exceeded 30 s';
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(3);
}, 30000);

const client = new Client({ name: 'warden-ask-in-task-client', version: '0.0.1' }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  out.elicited = req.params.message;
  return { action: 'accept', content: { name: 'alice' } };
});
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.TOKEN || 'alice'}` } },
});
try {
  await client.connect(transport);
  for await (const m of client.experimental.tasks.callToolStream({ name: 'ask_in_task', arguments: {} }, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 15000 })) {
    if (!out.types.includes(m.type)) out.types.push(m.type);
    if (m.type === 'result') out.text = m.result.content?.[0]?.text;
    if (m.type === 'error') out.error = String(m.error?.message ?? m.error);
  }
} catch (e) {
  out.error = String(e?.message ?? e);
}
await client.close().catch(() => {});
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
