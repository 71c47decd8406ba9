// Drives the @a2a-js/sdk 1.3.0 client through the valid A2A flows, in the
// same order and with the same JSON answer as ../a2a-py/client.py: card,
// extended card, send, plain message reply, stream, get, a message
// referencing the sent task, list, multi-turn
// input-required, push-config CRUD (A2A_HOOK as the webhook), cancel and
// subscribe. It resolves the card at A2A_URL, picks the card's preferred
// binding (or A2A_BINDING: JSONRPC or HTTP+JSON) and sends A2A_TOKEN as a
// bearer token through a call interceptor. Any SDK error prints
// {"error": ...} and exits 1. Every wait is bounded.
//
// usage: A2A_URL=http://127.0.0.1:PORT A2A_TOKEN=T A2A_HOOK=URL node client.mjs
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { TaskState, Role } from '@a2a-js/sdk';

const url = process.env.A2A_URL;
const token = process.env.A2A_TOKEN;
const hook = process.env.A2A_HOOK;
const binding = process.env.A2A_BINDING;
const TIMEOUT_MS = 20000;

const bearer = {
  async before(args) {
    args.options = {
      ...args.options,
      serviceParameters: { ...args.options?.serviceParameters, Authorization: `Bearer ${token}` },
    };
  },
  async after() {},
};

const state = (task) => TaskState[task.status.state];
const texts = (parts) => parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value);
const text = (task) => task.artifacts.flatMap((a) => texts(a.parts)).join(' ');
const request = (words, taskId = '', returnImmediately = false) => ({
  message: {
    messageId: randomUUID(), role: Role.ROLE_USER, taskId, contextId: '',
    parts: [{ content: { $case: 'text', value: words }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  },
  configuration: { acceptedOutputModes: [], returnImmediately, historyLength: undefined, taskPushNotificationConfig: undefined },
  metadata: undefined, tenant: '',
});
const signal = () => ({ signal: AbortSignal.timeout(TIMEOUT_MS) });

async function run() {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    clientConfig: { interceptors: [bearer] },
    ...(binding ? { preferredTransports: [binding] } : {}),
  });
  const client = await new ClientFactory(options).createFromUrl(url);
  const out = { sdk: '@a2a-js/sdk 1.3.0', binding: client.transport.protocolName };

  const ext = await client.getAgentCard(signal());
  out.card = ext.name;
  out.extendedSkills = ext.skills.map((s) => s.id).sort();

  const sent = await client.sendMessage(request('hello'), signal());
  out.send = { state: state(sent), text: text(sent) };

  const reply = await client.sendMessage(request('message: hi'), signal());
  out.message = { text: texts(reply.parts).join(' ') };

  const events = new Set();
  const chunks = [];
  let last = null;
  for await (const r of client.sendMessageStream(request('stream 3'), signal())) {
    const { $case: kind, value } = r.payload;
    events.add({ artifactUpdate: 'artifact_update', statusUpdate: 'status_update' }[kind] ?? kind);
    if (kind === 'artifactUpdate') chunks.push(...texts(value.artifact.parts));
    else if (kind === 'statusUpdate' || kind === 'task') last = state(value);
  }
  out.stream = { events: [...events].sort(), state: last, chunks };

  const got = await client.getTask({ id: sent.id, tenant: '' }, signal());
  out.get = { state: state(got), text: text(got) };

  const refReq = request('summarise');
  refReq.message.referenceTaskIds = [sent.id];
  const ref = await client.sendMessage(refReq, signal());
  out.reference = { state: state(ref), text: text(ref).replaceAll(sent.id, '<id>') };

  const listed = await client.listTasks({ tenant: '', contextId: '', pageToken: '', status: TaskState.TASK_STATE_UNSPECIFIED }, signal());
  out.list = { hasSend: listed.tasks.some((t) => t.id === sent.id) };

  const asked = await client.sendMessage(request('input name'), signal());
  out.input = { state: state(asked), question: texts(asked.status.message.parts).join(' ') };

  const cfg = await client.createTaskPushNotificationConfig({
    tenant: '', taskId: asked.id, id: 'cfg-1', url: hook, token: 'tok-123',
    authentication: { scheme: 'Bearer', credentials: 'cred-xyz' },
  }, signal());
  const fetched = await client.getTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: cfg.id }, signal());
  const listedCfg = await client.listTaskPushNotificationConfig({ tenant: '', taskId: asked.id, pageSize: 0, pageToken: '' }, signal());

  const answered = await client.sendMessage(request('alice', asked.id), signal());
  out.answer = { state: state(answered), text: text(answered) };

  let deleted = 'ok';
  try {
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: cfg.id }, signal());
  } catch (e) {
    deleted = String(e.message ?? e);
  }
  const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: asked.id, pageSize: 0, pageToken: '' }, signal());
  out.push = {
    created: cfg.url, get: fetched.url, list: listedCfg.configs.length,
    delete: deleted, afterDelete: after.configs.length, taskId: asked.id,
  };

  let waiting = await client.sendMessage(request('wait', '', true), signal());
  const cancelled = await client.cancelTask({ id: waiting.id, tenant: '' }, signal());
  const again = await client.getTask({ id: waiting.id, tenant: '' }, signal());
  out.cancel = { state: state(cancelled), get: state(again) };

  waiting = await client.sendMessage(request('wait', '', true), signal());
  const seen = [];
  for await (const r of client.resubscribeTask({ id: waiting.id, tenant: '' }, signal())) {
    const { $case: kind, value } = r.payload;
    if (kind === 'task' || kind === 'statusUpdate') seen.push(state(value));
    if (seen.length === 1 && kind === 'task') await client.cancelTask({ id: waiting.id, tenant: '' }, signal());
  }
  out.subscribe = { last: seen.at(-1) ?? null };
  return out;
}

try {
  console.log(JSON.stringify(await run()));
} catch (e) {
  console.log(JSON.stringify({ error: `${e.name}: ${e.message}` }));
  process.exit(1);
}
