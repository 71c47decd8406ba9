"""The Python a2a-sdk 1.3.0 test server Warden's A2A tests drive.

The SDK's DefaultRequestHandler (in-memory task and push-config stores, which
scope by owner, and the HTTP push sender) behind the SDK's JSON-RPC (/jsonrpc)
and HTTP+JSON (/rest) routes and the public agent card, with the same small
agent as test/peers/a2a-go (the first text part selects it):

    message: X   a plain Message reply "echo: X" (no task)
    input X      a task that asks a question (input-required); the next
                 message on that task completes it with "answer: <text>"
    stream N     a task streaming N artifact chunks, then completed
    wait         a working task that runs until cancelled (or 60 s pass)
    wait N       the same, completed after N seconds (1 to 60)
    anything     a task completed with the artifact "echo: <text>", followed
                 by " [ref ID: TEXT]" for each task the message's
                 referenceTaskIds name (loaded by the SDK's
                 SimpleRequestContextBuilder, which reads them through the
                 owner-scoped task store)

Authentication is Starlette's AuthenticationMiddleware with a bearer-token
backend (tokens from --tokens or A2A_TOKENS, "name=token,..."): the SDK's
context builder turns request.user into the call's user, whose name the
stores use as the owner. No token is the anonymous user; an unknown token
is refused with 401.

usage: python server.py --listen 127.0.0.1:PORT [--tokens alice=t1,bob=t2]
"""

import argparse
import asyncio
import ipaddress
import os
import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    SimpleUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse

from a2a.helpers.proto_helpers import (
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.agent_execution.simple_request_context_builder import (
    SimpleRequestContextBuilder,
)
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks.base_push_notification_sender import (
    BasePushNotificationSender,
)
from a2a.server.tasks.inmemory_push_notification_config_store import (
    InMemoryPushNotificationConfigStore,
)
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityScheme,
    TaskState,
)


class Agent(AgentExecutor):
    """echo / message / input / stream / wait, as in test/peers/a2a-go."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await finish(updater, 'answer: ' + text)
            return
        if text.startswith('message: '):
            await event_queue.enqueue_event(
                new_text_message('echo: ' + text[len('message: '):], context_id=context.context_id)
            )
            return
        if task is None:
            msg = context.message
            msg.task_id, msg.context_id = context.task_id, context.context_id
            await event_queue.enqueue_event(new_task_from_user_message(msg))
        await updater.start_work()
        verb, _, arg = text.partition(' ')
        if verb == 'input':
            await updater.requires_input(
                updater.new_agent_message([new_text_part(f'input required: {arg}?')])
            )
        elif verb == 'stream':
            n = int(arg) if arg.isdigit() and 1 <= int(arg) <= 100 else 3
            artifact_id = None
            for i in range(n):
                if artifact_id is None:
                    artifact_id = f'{context.task_id}-stream'
                    await updater.add_artifact([new_text_part(f'chunk {i + 1}')], artifact_id=artifact_id)
                else:
                    await updater.add_artifact(
                        [new_text_part(f'chunk {i + 1}')], artifact_id=artifact_id, append=True
                    )
                await asyncio.sleep(0.02)
            await updater.complete()
        elif verb == 'wait':
            await asyncio.sleep(int(arg) if arg.isdigit() and 1 <= int(arg) <= 60 else 60)
            await finish(updater, 'waited')
        else:
            await finish(updater, 'echo: ' + text + referenced(context))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def referenced(context: RequestContext) -> str:
    """What the agent was given of the referenced tasks."""
    return ''.join(
        f' [ref {t.id}: ' + ' '.join(p.text for a in t.artifacts for p in a.parts if p.text) + ']'
        for t in context.related_tasks
    )


async def finish(updater: TaskUpdater, text: str) -> None:
    await updater.add_artifact([new_text_part(text)])
    await updater.complete()


class BearerTokens(AuthenticationBackend):
    """Maps "Authorization: Bearer T" to the user named for T."""

    def __init__(self, users: dict[str, str]):
        self.users = users

    async def authenticate(self, conn):
        header = conn.headers.get('authorization')
        if header is None:
            return None  # Starlette's unauthenticated user
        scheme, _, token = header.partition(' ')
        name = self.users.get(token.strip()) if scheme.lower() == 'bearer' else None
        if name is None:
            raise AuthenticationError('unknown bearer token')
        return AuthCredentials(['authenticated']), SimpleUser(name)


def parse_tokens(spec: str) -> dict[str, str]:
    users = {}
    for item in filter(None, (s.strip() for s in spec.split(','))):
        name, sep, token = item.partition('=')
        if not sep or not name or not token:
            raise SystemExit(f'--tokens: {item!r} is not name=token')
        users[token] = name
    return users


def card(base: str) -> AgentCard:
    return AgentCard(
        name='warden-a2a-py-peer',
        description='a2a-sdk 1.3.0 test peer: echo, streaming, input-required, cancellable tasks',
        version='1.3.0',
        supported_interfaces=[
            AgentInterface(url=base + '/jsonrpc', protocol_binding='JSONRPC', protocol_version='1.0'),
            AgentInterface(url=base + '/rest', protocol_binding='HTTP+JSON', protocol_version='1.0'),
        ],
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True),
        security_schemes={'bearer': SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme='bearer'))},
        skills=[AgentSkill(id='echo', name='echo', description='echoes text, streams, asks for input', tags=['test'])],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--listen', default='127.0.0.1:9200')
    ap.add_argument('--tokens', default=os.environ.get('A2A_TOKENS', ''))
    args = ap.parse_args()
    host, _, port = args.listen.rpartition(':')
    if not ipaddress.ip_address(host).is_loopback:
        raise SystemExit('--listen: a test peer listens on loopback only')
    base = f'http://{host}:{port}'
    public = card(base)
    extended = AgentCard()
    extended.CopyFrom(public)
    extended.skills.append(AgentSkill(id='internal-admin', name='internal admin',
                                      description='extended-card-only skill', tags=['internal']))
    push_store = InMemoryPushNotificationConfigStore()
    task_store = InMemoryTaskStore()
    handler = DefaultRequestHandler(
        agent_executor=Agent(),
        task_store=task_store,
        request_context_builder=SimpleRequestContextBuilder(should_populate_referred_tasks=True,
                                                            task_store=task_store),
        agent_card=public,
        extended_agent_card=extended,
        push_config_store=push_store,
        push_sender=BasePushNotificationSender(httpx.AsyncClient(timeout=2), push_store),
    )
    routes = [
        *create_agent_card_routes(public),
        *create_jsonrpc_routes(handler, rpc_url='/jsonrpc'),
        *create_rest_routes(handler, path_prefix='/rest'),
    ]
    app = Starlette(routes=routes, middleware=[
        Middleware(AuthenticationMiddleware, backend=BearerTokens(parse_tokens(args.tokens)),
                   on_error=lambda _conn, exc: JSONResponse({'error': str(exc)}, status_code=401)),
    ])
    print(f'a2a-py-server: a2a-sdk 1.3.0 on {base}', file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=int(port), log_level='warning')


if __name__ == '__main__':
    main()
