// Scenario driver on the MCP TypeScript SDK 1.32.2 Client: two principals, A
// and B, each with its own session and bearer token, exercise Tasks against
// MCP_URL (a task server directly, or Warden in front of one) and print ONE
// JSON object on stdout. A step that fails is recorded as
// {"code": <JSON-RPC code>, "message": ...} (plus "http": <status> when the
// HTTP exchange itself failed) and the scenario goes on.
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN_A=alice TOKEN_B=bob node client.mjs
//
// Exit 0 when the scenario ran to its end, non-zero on a crash or when the
// whole run overruns its deadline (RUN_TIMEOUT_MS, default 60000).
import { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema, CreateTaskResultSchema, McpError, TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const TOKEN_A = process.env.TOKEN_A || 'alice';
const TOKEN_B = process.env.TOKEN_B || 'bob';
const REQ_TIMEOUT = Number(process.env.REQ_TIMEOUT_MS || 10000);   // per request
const RUN_TIMEOUT = Number(process.env.RUN_TIMEOUT_MS || 60000);   // whole run
const UNKNOWN_ID = '0123456789abcdef0123456789abcdef';
const TERMINAL = ['completed', 'failed', 'cancelled'];
const opts = { timeout: REQ_TIMEOUT };
const Passthrough = z.object({}).passthrough();

const out = {};
const sleep = (ms) => new Promise(r => setTimeout(r, ms));

// The whole run is bounded: past the deadline print what there is and fail.
const deadline = setTimeout(() => {
  out.fatal = { message: `run exceeded ${RUN_TIMEOUT} ms` };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(3);
}, RUN_TIMEOUT);

function errInfo(e) {
  if (e instanceof McpError) {
    const info = { code: e.code, message: e.message.replace(/^MCP error -?\d+: /, '') };
    if (e.data !== undefined) info.data = e.data;
    return info;
  }
  if (e instanceof StreamableHTTPError) {
    // The body of a refused POST may hold a JSON-RPC error; surface its code.
    const m = /^Streamable HTTP error: Error POSTing to endpoint: (.*)$/s.exec(e.message);
    if (m) {
      try {
        const body = JSON.parse(m[1]);
        if (body && body.error) return { code: body.error.code ?? null, message: body.error.message ?? '', http: e.code };
      } catch { /* not JSON */ }
    }
    return { code: null, message: e.message, http: e.code };
  }
  return { code: typeof e?.code === 'number' ? e.code : null, message: String(e?.message ?? e) };
}

// step runs fn and returns its value, or the error as data.
async function step(fn) {
  try { return await fn(); } catch (e) { return { error: errInfo(e) }; }
}
const failed = (v) => v && typeof v === 'object' && 'error' in v && Object.keys(v).length === 1;
const unwrap = (v) => (failed(v) ? v.error : v);
const textOf = (r) => (r.content || []).filter(c => c.type === 'text').map(c => c.text).join('');
const brief = (t) => ({ taskId: t.taskId, status: t.status });

function makeClient(name, token, notes) {
  const client = new Client({ name, version: '0.0.1' }, { capabilities: {} });
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
    notes.push({ taskId: n.params.taskId, status: n.params.status });
  });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  return { client, transport };
}

function createSlowSum(client, a, b, delayMs) {
  return client.request({
    method: 'tools/call',
    params: { name: 'slow_sum', arguments: { a, b, delay_ms: delayMs }, task: { ttl: 60000 } },
  }, CreateTaskResultSchema, opts);
}

async function main() {
  const notesA = [], notesB = [];
  const A = makeClient('warden-peer-client-a', TOKEN_A, notesA);
  const B = makeClient('warden-peer-client-b', TOKEN_B, notesB);
  const a = A.client, b = B.client;

  const connA = await step(() => a.connect(A.transport, opts));
  if (failed(connA)) out.connectA = connA.error;
  const connB = await step(() => b.connect(B.transport, opts));
  if (failed(connB)) out.connectB = connB.error;

  out.tools = unwrap(await step(async () => {
    const r = await a.listTools(undefined, opts);
    return Object.fromEntries(r.tools.map(t => [t.name, t.execution?.taskSupport ?? null]));
  }));

  // A's task, polled to its end.
  const created = await step(async () => (await createSlowSum(a, 2, 40, 300)).task.taskId);
  out.created = failed(created) ? created.error : created;
  const taskA = failed(created) ? UNKNOWN_ID : created;
  out.polls = [];
  out.final = null;
  for (let i = 0; i < 50; i++) {
    const g = await step(() => a.experimental.tasks.getTask(taskA, opts));
    if (failed(g)) { out.polls.push(g.error); break; }
    out.polls.push(g.status);
    out.final = g.status;
    if (TERMINAL.includes(g.status)) break;
    await sleep(100);
  }
  const result = await step(async () => textOf(await a.experimental.tasks.getTaskResult(taskA, CallToolResultSchema, opts)));
  out.result = failed(result) ? result.error : result;

  // B's own task, and B reaching for A's.
  const bCreated = await step(async () => (await createSlowSum(b, 1, 1, 5000)).task.taskId);
  out.bCreated = failed(bCreated) ? bCreated.error : bCreated;
  out.bGetA = unwrap(await step(async () => brief(await b.experimental.tasks.getTask(taskA, opts))));
  out.bResultA = unwrap(await step(async () => textOf(await b.experimental.tasks.getTaskResult(taskA, CallToolResultSchema, opts))));
  out.bCancelA = unwrap(await step(async () => brief(await b.experimental.tasks.cancelTask(taskA, opts))));
  out.bGetUnknown = unwrap(await step(async () => brief(await b.experimental.tasks.getTask(UNKNOWN_ID, opts))));
  out.aList = unwrap(await step(async () => (await a.experimental.tasks.listTasks(undefined, opts)).tasks.map(t => t.taskId)));
  out.bList = unwrap(await step(async () => (await b.experimental.tasks.listTasks(undefined, opts)).tasks.map(t => t.taskId)));
  out.bCancelOwn = failed(bCreated) ? bCreated.error
    : unwrap(await step(async () => (await b.experimental.tasks.cancelTask(bCreated, opts)).status));

  // Task negotiation the tools do not allow. Raw requests, so the SDK
  // client's own checks of taskSupport do not stop them before the wire.
  out.forbiddenTask = unwrap(await step(() => a.request({
    method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'forbidden-task' }, task: { ttl: 60000 } },
  }, Passthrough, opts)));
  out.requiredPlain = unwrap(await step(() => a.request({
    method: 'tools/call',
    params: { name: 'must_task', arguments: { delay_ms: 50 } },
  }, Passthrough, opts)));
  out.plainEcho = unwrap(await step(async () => textOf(await a.callTool({ name: 'echo', arguments: { text: 'hi' } }, CallToolResultSchema, opts))));

  // The SDK's streaming helper: create, poll, result.
  let streamTask = null;
  out.stream = unwrap(await step(async () => {
    const types = [];
    const run = (async () => {
      for await (const m of a.experimental.tasks.callToolStream(
        { name: 'slow_sum', arguments: { a: 5, b: 5, delay_ms: 200 } }, CallToolResultSchema, { ...opts, task: { ttl: 60000 } })) {
        if (m.type === 'taskCreated') streamTask = m.task.taskId;
        types.push(m.type === 'error' ? { error: errInfo(m.error) } : m.type);
      }
    })();
    await Promise.race([run, sleep(15000).then(() => { types.push('timeout'); })]);
    return types;
  }));

  // Wait (at most ~1 s) for the completion notices of A's two tasks.
  const want = [taskA, streamTask].filter(Boolean);
  for (let i = 0; i < 20; i++) {
    if (want.every(id => notesA.some(n => n.taskId === id && TERMINAL.includes(n.status)))) break;
    await sleep(50);
  }
  out.notifications = notesA;
  out.bNotifications = notesB;

  await Promise.allSettled([a.close(), b.close()]);
}

try {
  await main();
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (e) {
  out.fatal = { message: String(e?.stack ?? e) };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(2);
}
