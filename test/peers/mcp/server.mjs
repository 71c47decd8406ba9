// A tiny MCP task server on the MCP TypeScript SDK 1.32.2 (protocol 2025-11-25,
// experimental Tasks), over Streamable HTTP with stateful sessions.
//
//   PORT=3901 node server.mjs            # http://127.0.0.1:3901/mcp, SSE responses (PORT=0: any free port)
//   JSON_RESP=1 node server.mjs          # application/json responses instead of SSE
//   LEAKY=1 node server.mjs              # task store ignores the session (SDK issue #1486)
//   LOG_WIRE=1 node server.mjs           # log every request and response on stdout
//   EVENT_STORE=1 node server.mjs        # resumable SSE streams (the SDK's InMemoryEventStore)
//   RETRY_MS=50 node server.mjs          # the retry field of the priming event (with EVENT_STORE=1)
//   EXPRESS=1 node server.mjs            # served by the SDK's createMcpExpressApp() (express.json(): body-parser
//                                        # decodes the body in the charset its Content-Type names, utf-7 included)
//
// Tools:
//   echo      taskSupport forbidden: returns its text
//   slow_sum  taskSupport optional:  a+b after delay_ms
//   must_task taskSupport required:  "done" after delay_ms
//   big       taskSupport forbidden: a text of exactly `bytes` bytes ("x" repeated)
//   poll_sum  taskSupport forbidden: closes the request's SSE stream (SSE polling, with
//             EVENT_STORE=1), then answers "sum=a+b" after delay_ms: the client gets the
//             answer by resuming with GET + Last-Event-ID
//   ask_in_task taskSupport required: the task asks the client for a name (elicitation/create
//             with related-task metadata, queued until the client's tasks/result) and
//             completes with "hello <name>"
//   add_late  taskSupport forbidden: registers the tool `late` (taskSupport forbidden, answers "late")
//             in the caller's session; the SDK sends notifications/tools/list_changed on the
//             session's standalone GET stream
//   ask_task  taskSupport forbidden: asks the client for a name with a task-augmented
//             elicitation/create (the client runs the task; the server polls the client's
//             tasks/get and reads tasks/result), and answers {"types":[...],"final":...}
// Debug endpoints (GET):
//   /debug/invocations    {"echo":n,"slow_sum":n,"must_task":n,...} handler/createTask calls,
//                         "tools_list": the tools/list requests received
//   /debug/authorization  Authorization header values seen on /mcp, first-seen order
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';

const PORT = Number(process.env.PORT || 3901);
const JSON_RESP = process.env.JSON_RESP === '1';
const LEAKY = process.env.LEAKY === '1';
const LOG_WIRE = process.env.LOG_WIRE === '1';
const EVENT_STORE = process.env.EVENT_STORE === '1';
const RETRY_MS = process.env.RETRY_MS ? Number(process.env.RETRY_MS) : undefined;
const EXPRESS = process.env.EXPRESS === '1';

const invocations = { echo: 0, slow_sum: 0, must_task: 0, big: 0, poll_sum: 0, tools_list: 0 };
const authorizations = [];

// The SDK's InMemoryTaskStore binds a task to the session that created it.
// LEAKY=1 drops the session id on every call, so every session sees every task,
// as before the fix of SDK issue #1486.
function leaky(store) {
  return {
    createTask: (params, requestId, request) => store.createTask(params, requestId, request, undefined),
    getTask: (taskId) => store.getTask(taskId, undefined),
    storeTaskResult: (taskId, status, result) => store.storeTaskResult(taskId, status, result, undefined),
    getTaskResult: (taskId) => store.getTaskResult(taskId, undefined),
    updateTaskStatus: (taskId, status, statusMessage) => store.updateTaskStatus(taskId, status, statusMessage, undefined),
    listTasks: (cursor) => store.listTasks(cursor, undefined),
  };
}
const taskStore = LEAKY ? leaky(new InMemoryTaskStore()) : new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const transports = new Map();

// completeLater stores a tool result after delay_ms unless the task was
// cancelled (or expired) in the meantime.
function completeLater(store, taskId, delayMs, text) {
  setTimeout(async () => {
    try {
      await store.storeTaskResult(taskId, 'completed', { content: [{ type: 'text', text }] });
    } catch (e) {
      console.error(`task ${taskId}: result not stored (${e.message})`);
    }
  }, delayMs);
}

function taskHandlers(name, textOf) {
  return {
    async createTask(args, { taskStore, taskRequestedTtl }) {
      invocations[name]++;
      const task = await taskStore.createTask({ ttl: taskRequestedTtl, pollInterval: 100 });
      completeLater(taskStore, task.taskId, args.delay_ms, textOf(args));
      return { task };
    },
    async getTask(_args, { taskId, taskStore }) { return await taskStore.getTask(taskId); },
    async getTaskResult(_args, { taskId, taskStore }) { return await taskStore.getTaskResult(taskId); },
  };
}

function makeServer() {
  const server = new McpServer({ name: 'tiny-task-server', version: '0.0.1' }, {
    capabilities: { tools: {}, resources: { subscribe: true }, prompts: {}, completions: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore, taskMessageQueue,
  });
  server.registerTool('echo', { description: 'echo text', inputSchema: { text: z.string() } },
    async ({ text }) => { invocations.echo++; return { content: [{ type: 'text', text }] }; });
  server.registerTool('add_late', { description: 'registers the tool late in this session', inputSchema: {} },
    async () => {
      server.registerTool('late', { description: 'added later', inputSchema: {} }, async () => ({ content: [{ type: 'text', text: 'late' }] }));
      return { content: [{ type: 'text', text: 'added' }] };
    });
  server.registerTool('big', { description: 'a text of `bytes` bytes', inputSchema: { bytes: z.number() } },
    async ({ bytes }) => { invocations.big++; return { content: [{ type: 'text', text: 'x'.repeat(bytes) }] }; });
  server.registerTool('poll_sum', {
    description: 'closes the request stream, then a+b after delay_ms',
    inputSchema: { a: z.number(), b: z.number(), delay_ms: z.number().default(500) },
  }, async ({ a, b, delay_ms }, extra) => {
    invocations.poll_sum++;
    extra.closeSSEStream?.();
    await new Promise(r => setTimeout(r, delay_ms));
    return { content: [{ type: 'text', text: `sum=${a + b}` }] };
  });
  server.registerTool('ask_task', { description: 'a task-augmented elicitation of the client', inputSchema: {} },
    async (_args, extra) => {
      const types = []; let final = null;
      const stream = server.server.experimental.tasks.elicitInputStream({
        mode: 'form', message: 'name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      }, { task: { ttl: 60000 }, relatedRequestId: extra.requestId, timeout: 10000 });
      for await (const m of stream) {
        types.push(m.type);
        if (m.type === 'result') final = m.result;
        if (m.type === 'error') final = { error: String(m.error?.message ?? m.error) };
      }
      return { content: [{ type: 'text', text: JSON.stringify({ types: [...new Set(types)], final }) }] };
    });
  // Two resources: the server looks a resources/read URI up as
  // new URL(uri).toString() spells it (DEMO://vault/secret reads
  // demo://vault/secret).
  for (const name of ['secret', 'public']) {
    server.registerResource(name, `demo://vault/${name}`, { mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, text: `the ${name} text` }] }));
  }
  // A resource template whose names complete (completion/complete on
  // ref/resource), a prompt whose argument completes (ref/prompt), and
  // resources/subscribe and unsubscribe (answered {}).
  server.registerResource('note', new ResourceTemplate('demo://vault/{name}', {
    list: undefined, complete: { name: (v) => ['secret', 'public'].filter(n => n.startsWith(v)) },
  }), { mimeType: 'text/plain' }, async (uri, { name }) => ({ contents: [{ uri: uri.href, text: `note ${name}` }] }));
  server.registerPrompt('vault_prompt', {
    description: 'names a vault entry',
    argsSchema: { entry: completable(z.string(), (v) => ['secret', 'public'].filter(n => n.startsWith(v))) },
  }, ({ entry }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `read ${entry}` } }] }));
  server.server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));
  server.experimental.tasks.registerToolTask('slow_sum', {
    description: 'adds a+b after delay_ms (task-capable)',
    inputSchema: { a: z.number(), b: z.number(), delay_ms: z.number().default(300) },
    execution: { taskSupport: 'optional' },
  }, taskHandlers('slow_sum', ({ a, b }) => `sum=${a + b}`));
  server.experimental.tasks.registerToolTask('ask_in_task', {
    description: 'asks the client for a name within the task',
    inputSchema: {},
    execution: { taskSupport: 'required' },
  }, {
    async createTask(_args, { taskStore, taskRequestedTtl }) {
      const task = await taskStore.createTask({ ttl: taskRequestedTtl, pollInterval: 50 });
      (async () => {
        await taskStore.updateTaskStatus(task.taskId, 'input_required');
        const r = await server.server.elicitInput({
          mode: 'form', message: 'name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
        }, { relatedTask: { taskId: task.taskId }, timeout: 10000 });
        await taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `hello ${r.content?.name}` }] });
      })().catch(async (e) => {
        await taskStore.storeTaskResult(task.taskId, 'failed', { content: [{ type: 'text', text: String(e?.message ?? e) }], isError: true }).catch(() => {});
      });
      return { task };
    },
    async getTask(_args, { taskId, taskStore }) { return await taskStore.getTask(taskId); },
    async getTaskResult(_args, { taskId, taskStore }) { return await taskStore.getTaskResult(taskId); },
  });
  server.experimental.tasks.registerToolTask('must_task', {
    description: 'answers "done" after delay_ms; only as a task',
    inputSchema: { delay_ms: z.number().default(300) },
    execution: { taskSupport: 'required' },
  }, taskHandlers('must_task', () => 'done'));
  return server;
}

function log(dir, obj) { if (LOG_WIRE) console.log(`${dir} ${JSON.stringify(obj)}`); }

function sendJSON(res, code, value) {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function wireLogger(res) {
  const out = []; let hdrs = {};
  const w = res.write.bind(res), e = res.end.bind(res), wh = res.writeHead.bind(res);
  res.writeHead = (code, ...a) => {
    const h = a.find(x => x && typeof x === 'object');
    if (h) hdrs = { ...hdrs, ...Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v])) };
    return wh(code, ...a);
  };
  res.write = (c, ...a) => { if (c) out.push(Buffer.from(c)); return w(c, ...a); };
  res.end = (c, ...a) => {
    if (c && typeof c !== 'function') out.push(Buffer.from(c));
    const text = Buffer.concat(out).toString('utf8');
    const ct = String(hdrs['content-type'] || res.getHeader('content-type') || '');
    let shown = text;
    try {
      if (ct.includes('text/event-stream')) shown = text.split('\n').filter(l => l.startsWith('data:') && l.length > 6).map(l => JSON.parse(l.slice(5)));
      else if (ct.includes('application/json') && text) shown = JSON.parse(text);
    } catch { /* show the raw text */ }
    log('<<', { status: res.statusCode, ct, sid: hdrs['mcp-session-id'] ?? res.getHeader('mcp-session-id') ?? null, body: shown });
    return e(c, ...a);
  };
}

const httpServer = http.createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (req.method === 'GET' && path === '/debug/invocations') return sendJSON(res, 200, invocations);
  if (req.method === 'GET' && path === '/debug/authorization') return sendJSON(res, 200, authorizations);
  if (path !== '/mcp') { res.writeHead(404).end(); return; }

  const chunks = []; for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks).toString('utf8');
  let body;
  try { body = raw ? JSON.parse(raw) : undefined; } catch {
    return sendJSON(res, 400, { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
  }
  await serve(req, res, body);
});

// serve hands one request, its body parsed, to its session's transport.
async function serve(req, res, body) {
  const auth = req.headers.authorization ?? null;
  if (!authorizations.includes(auth)) authorizations.push(auth);
  if (body && body.method === 'tools/list') invocations.tools_list++;
  const sid = req.headers['mcp-session-id'];
  log('>>', { http: `${req.method} ${req.url}`, sid: sid ?? null, pv: req.headers['mcp-protocol-version'] ?? null, auth, body: body ?? null });
  if (LOG_WIRE) wireLogger(res);
  try {
    let t = sid ? transports.get(sid) : undefined;
    if (!t) {
      if (sid || !(body && body.method === 'initialize')) {
        return sendJSON(res, sid ? 404 : 400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no valid session' }, id: null });
      }
      t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(), enableJsonResponse: JSON_RESP,
        eventStore: EVENT_STORE ? new InMemoryEventStore() : undefined, retryInterval: RETRY_MS,
        onsessioninitialized: (id) => transports.set(id, t),
      });
      t.onclose = () => { if (t.sessionId) transports.delete(t.sessionId); };
      await makeServer().connect(t);
    }
    await t.handleRequest(req, res, body);
  } catch (err) {
    console.error('handler error', err);
    if (!res.headersSent) res.writeHead(500).end();
  }
}

// PORT=0 picks a free port; the line below names the one in use.
const listening = (srv) => () => {
  console.error(`tiny MCP task server on http://127.0.0.1:${srv.address().port}/mcp`);
  console.error(`modes: json=${JSON_RESP} leaky=${LEAKY} log_wire=${LOG_WIRE} event_store=${EVENT_STORE} express=${EXPRESS}`);
};
if (EXPRESS) {
  const app = createMcpExpressApp();
  app.get('/debug/invocations', (req, res) => sendJSON(res, 200, invocations));
  app.get('/debug/authorization', (req, res) => sendJSON(res, 200, authorizations));
  app.all('/mcp', (req, res) => serve(req, res, req.body));
  const srv = app.listen(PORT, '127.0.0.1', () => listening(srv)());
} else {
  httpServer.listen(PORT, '127.0.0.1', listening(httpServer));
}
