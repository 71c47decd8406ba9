// The MCP TypeScript SDK 1.32.2 Client in the two directions of a task that
// needs the user's input (2025-11-25 tasks), against server.mjs. Prints ONE
// JSON object.
//
//   FLOW=client: the client runs the task. It declares
//     tasks.requests.elicitation.create and keeps its tasks in the SDK's
//     InMemoryTaskStore; the ask_task tool's task-augmented elicitation/create
//     gets a CreateTaskResult, the server polls the client's tasks/get and
//     reads its tasks/result. Prints {"result":{"types":[...],"final":...}}
//     (the tool's text) or {"error":...}.
//   FLOW=server: the server runs the task. callToolStream runs ask_in_task,
//     whose elicitation/create (related-task metadata) reaches the client on
//     its tasks/result. Prints {"types":[...],"elicited":...,"text":...}.
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN=alice FLOW=client node task_elicit.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const clientTask = process.env.FLOW === 'client';
const answer = { action: 'accept', content: { name: 'alice' } };
const out = clientTask ? {} : { types: [], elicited: null };
const deadline = setTimeout(() => {
  out.fatal = 'run exceeded 30 s';
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(3);
}, 30000);

const client = clientTask
  ? new Client({ name: 'warden-task-elicit-client', version: '0.0.1' }, {
    capabilities: { elicitation: { form: {} }, tasks: { list: {}, cancel: {}, requests: { elicitation: { create: {} } } } },
    taskStore: new InMemoryTaskStore(),
  })
  : new Client({ name: 'warden-task-elicit-client', version: '0.0.1' }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
  if (!clientTask) {
    out.elicited = req.params.message;
    return answer;
  }
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
  if (clientTask) {
    const r = await client.callTool({ name: 'ask_task', arguments: {} }, CallToolResultSchema, { timeout: 20000 });
    out.result = JSON.parse(r.content[0].text);
  } else {
    for await (const m of client.experimental.tasks.callToolStream({ name: 'ask_in_task', arguments: {} }, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 15000 })) {
      if (!out.types.includes(m.type)) out.types.push(m.type);
      if (m.type === 'result') out.text = m.result.content?.[0]?.text;
      if (m.type === 'error') out.error = String(m.error?.message ?? m.error);
    }
  }
} catch (e) {
  out.error = String(e?.message ?? e);
}
await client.close().catch(() => {});
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
