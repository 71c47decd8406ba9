// Stream resumption on the MCP TypeScript SDK 1.32.2 Client: principal A
// calls poll_sum, whose server closes the POST stream before answering (SSE
// polling; server.mjs with EVENT_STORE=1), so the client gets the answer by
// resuming on its own with GET + Last-Event-ID. Then principal B, with its
// own session, tries to resume A's stream with A's last event id, and with
// A's session too. Prints ONE JSON object:
//   {answer, ms, tokens, lastToken, bOwnSession: {status, body}, bTheirSession: {status, body}}
//
//   MCP_URL=http://127.0.0.1:3901/mcp TOKEN_A=alice TOKEN_B=bob node resume.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.MCP_URL || 'http://127.0.0.1:3901/mcp');
const TOKEN_A = process.env.TOKEN_A || 'alice';
const TOKEN_B = process.env.TOKEN_B || 'bob';
const REQ_TIMEOUT = Number(process.env.REQ_TIMEOUT_MS || 8000);
const DELAY = Number(process.env.DELAY_MS || 800);
const out = {};
const deadline = setTimeout(() => {
  out.fatal = { message: 'run exceeded its deadline' };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(3);
}, REQ_TIMEOUT * 3);

function connect(name, token) {
  const client = new Client({ name, version: '0.0.1' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 500, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
  });
  return { client, transport };
}

// resumeAs sends GET + Last-Event-ID as token with session sid and reads the
// stream for up to ms (it may stay open): the status and what it held.
async function resumeAs(token, sid, lastEventId, ms) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  let status = null, body = '';
  try {
    const res = await fetch(url, {
      method: 'GET', signal: ac.signal,
      headers: {
        Authorization: `Bearer ${token}`, Accept: 'text/event-stream', 'Mcp-Session-Id': sid,
        'Mcp-Protocol-Version': '2025-11-25', 'Last-Event-ID': lastEventId,
      },
    });
    status = res.status;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      body += dec.decode(value, { stream: true });
    }
  } catch (e) {
    if (e.name !== 'AbortError') body += `[${e.message}]`;
  } finally {
    clearTimeout(timer);
  }
  return { status, body };
}

async function main() {
  const A = connect('warden-resume-a', TOKEN_A);
  const B = connect('warden-resume-b', TOKEN_B);
  A.client.onerror = () => {}; // the dropped stream is reported here; the client resumes
  await A.client.connect(A.transport);
  await B.client.connect(B.transport);

  const tokens = [];
  const t0 = Date.now();
  try {
    const r = await A.client.request(
      { method: 'tools/call', params: { name: 'poll_sum', arguments: { a: 1, b: 2, delay_ms: DELAY } } },
      CallToolResultSchema,
      { timeout: REQ_TIMEOUT, onresumptiontoken: (t) => tokens.push(t) },
    );
    out.answer = (r.content || []).map(c => c.text).join('');
  } catch (e) {
    out.answer = { error: String(e?.message ?? e) };
  }
  out.ms = Date.now() - t0;
  out.tokens = tokens.length;
  out.lastToken = tokens[tokens.length - 1] ?? null;

  if (out.lastToken) {
    // B replays A's stream: in B's own session, and in A's.
    out.bOwnSession = await resumeAs(TOKEN_B, B.transport.sessionId, tokens[0], 1500);
    out.bTheirSession = await resumeAs(TOKEN_B, A.transport.sessionId, tokens[0], 1500);
  }
  await A.client.close();
  await B.client.close();
}

main().then(() => {
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}, (e) => {
  out.fatal = { message: String(e?.stack ?? e) };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(2);
});
