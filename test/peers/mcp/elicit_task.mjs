// The MCP TypeScript SDK 1.32.2 Client as the receiver of a task-augmented
// elicitation (2025-11-25 tasks, client side): it declares
// tasks.requests.elicitation.create, keeps its tasks in the SDK's
// InMemoryTaskStore, and answers server.mjs's ask_task tool's
// elicitation/create {task} with a CreateTaskResult; the server then polls
// the client's tasks/get and reads its tasks/result. Prints ONE JSON object:
// the tool's text ({"types":[...],"final":...}) or the error.
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN=alice node elicit_task.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const answer = { action: 'accept', content: { name: 'alice' } };
const out = {};
const deadline = setTimeout(() => {
  out.fatal = 'run exceeded 30 s';
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(3);
}, 30000);

const client = new Client({ name: 'warden-elicit-task-client', version: '0.0.1' }, {
  capabilities: { elicitation: { form: {} }, tasks: { list: {}, cancel: {}, requests: { elicitation: { create: {} } } } },
  taskStore: new InMemoryTaskStore(),
});
client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
  if (!req.params.task) return answer;
  const task = await extra.taskStore.createTask({ ttl: req.params.task.ttl, pollInterval: 50 });
  setTimeout(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', answer), 100);
  return { task };
});
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.TOKEN || 'alice'}` } },
});
try {
  await client.connect(transport);
  const r = await client.callTool({ name: 'ask_task', arguments: {} }, CallToolResultSchema, { timeout: 20000 });
  out.result = JSON.parse(r.content[0].text);
} catch (e) {
  out.error = String(e?.message ?? e);
}
await client.close().catch(() => {});
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
