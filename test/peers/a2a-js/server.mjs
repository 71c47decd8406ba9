// A2A 1.0 JSON-RPC server on @a2a-js/sdk 1.3.0's own Express handlers
// (jsonRpcHandler: express.json(), that is body-parser, then the SDK's
// JsonRpcTransportHandler), with an agent that answers every message "ok"
// and counts the messages it ran.
//
//   PORT=3903 node server.mjs
//
// express (5.3.0, the release test/peers/mcp pins too) is installed with
// the SDK by this directory's package-lock.json (scripts/peers.sh a2a).
//
// Endpoints: POST /jsonrpc, GET /.well-known/agent-card.json,
// GET /debug/executions {"executions": n}.
import { randomUUID } from 'node:crypto';
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const PORT = Number(process.env.PORT || 3903);
let executions = 0;

const card = {
  name: 'warden-js-peer', description: 'answers ok', version: '0.0.0',
  supportedInterfaces: [{ url: `http://127.0.0.1:${PORT}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: false, pushNotifications: false },
  defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [],
};

const executor = {
  async execute(ctx, bus) {
    executions++;
    bus.publish(AgentEvent.message({ messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text: 'ok' }], contextId: ctx.contextId }));
    bus.finished();
  },
  async cancelTask() {},
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
const app = express();
app.get('/debug/executions', (req, res) => res.json({ executions }));
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const srv = app.listen(PORT, '127.0.0.1', () => console.error(`a2a-js server on http://127.0.0.1:${srv.address().port}/jsonrpc`));
