"""Drives the Python a2a-sdk 1.3.0 client through the valid A2A flows.

It resolves the agent card at --url, builds the SDK's client for the card's
preferred binding (or --binding JSONRPC|HTTP+JSON), authenticates with
--token as a bearer token and runs: card, extended card, send, plain message
reply, stream, get, a message referencing the sent task, list, multi-turn
input-required, push-config CRUD (with --hook as the webhook), cancel and
subscribe. It prints one JSON object whose
fields test/a2a_peers_test.go compares (the same shape as a2a-js/client.mjs);
any SDK error is printed as {"error": ...} with exit status 1. Every wait is
bounded.

usage: python client.py --url http://127.0.0.1:PORT --token T --hook URL
"""

import argparse
import asyncio
import json
import sys
import uuid

import httpx

from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

TIMEOUT = 20


def state(task) -> str:
    return TaskState.Name(task.status.state)


def text(task) -> str:
    return ' '.join(p.text for a in task.artifacts for p in a.parts if p.text)


def request(words: str, task_id: str = '', immediately: bool = False) -> SendMessageRequest:
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[new_text_part(words)], task_id=task_id)
    return SendMessageRequest(message=msg, configuration=SendMessageConfiguration(return_immediately=immediately))


async def one(client, req):
    """The single answer of a non-streaming send."""
    out = [r async for r in client.send_message(req)]
    if len(out) != 1:
        raise RuntimeError(f'non-streaming send gave {len(out)} answers')
    return out[0]


async def run(args) -> dict:
    http = httpx.AsyncClient(headers={'Authorization': f'Bearer {args.token}'}, timeout=TIMEOUT)
    bindings = [args.binding] if args.binding else []
    plain = await create_client(args.url, ClientConfig(streaming=False, httpx_client=http,
                                                       supported_protocol_bindings=bindings))
    streaming = await create_client(args.url, ClientConfig(streaming=True, httpx_client=http,
                                                           supported_protocol_bindings=bindings))
    transport = type(getattr(plain, '_transport', None)).__name__
    out = {'sdk': 'a2a-sdk 1.3.0',
           'binding': {'JsonRpcTransport': 'JSONRPC', 'RestTransport': 'HTTP+JSON'}.get(transport, transport)}

    ext = await plain.get_extended_agent_card(GetExtendedAgentCardRequest())
    out['card'] = ext.name
    out['extendedSkills'] = sorted(s.id for s in ext.skills)

    sent = (await one(plain, request('hello'))).task
    out['send'] = {'state': state(sent), 'text': text(sent)}

    reply = (await one(plain, request('message: hi'))).message
    out['message'] = {'text': ' '.join(p.text for p in reply.parts)}

    events, chunks, last = [], [], None
    async for r in streaming.send_message(request('stream 3')):
        kind = r.WhichOneof('payload')
        events.append(kind)
        if kind == 'artifact_update':
            chunks += [p.text for p in r.artifact_update.artifact.parts]
        elif kind == 'status_update':
            last = TaskState.Name(r.status_update.status.state)
        elif kind == 'task':
            last = state(r.task)
    out['stream'] = {'events': sorted(set(events)), 'state': last, 'chunks': chunks}

    got = await plain.get_task(GetTaskRequest(id=sent.id))
    out['get'] = {'state': state(got), 'text': text(got)}

    ref_msg = request('summarise')
    ref_msg.message.reference_task_ids.append(sent.id)
    ref = (await one(plain, ref_msg)).task
    out['reference'] = {'state': state(ref), 'text': text(ref).replace(sent.id, '<id>')}

    listed = await plain.list_tasks(ListTasksRequest())
    out['list'] = {'hasSend': any(t.id == sent.id for t in listed.tasks)}

    asked = (await one(plain, request('input name'))).task
    out['input'] = {'state': state(asked),
                    'question': ' '.join(p.text for p in asked.status.message.parts)}

    cfg = await plain.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=asked.id, id='cfg-1', url=args.hook, token='tok-123',
        authentication=AuthenticationInfo(scheme='Bearer', credentials='cred-xyz')))
    fetched = await plain.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=asked.id, id=cfg.id))
    listed_cfg = await plain.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=asked.id))

    answered = (await one(plain, request('alice', task_id=asked.id))).task
    out['answer'] = {'state': state(answered), 'text': text(answered)}

    # a2a-go v2.3.1 answers a delete with neither result nor error, which this
    # SDK refuses: the driver records what the client said and goes on.
    try:
        await plain.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=asked.id, id=cfg.id))
        deleted = 'ok'
    except A2AClientError as e:
        deleted = str(e)
    after = await plain.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=asked.id))
    out['push'] = {'created': cfg.url, 'get': fetched.url, 'list': len(listed_cfg.configs),
                   'delete': deleted, 'afterDelete': len(after.configs), 'taskId': asked.id}

    waiting = (await one(plain, request('wait', immediately=True))).task
    cancelled = await plain.cancel_task(CancelTaskRequest(id=waiting.id))
    again = await plain.get_task(GetTaskRequest(id=waiting.id))
    out['cancel'] = {'state': state(cancelled), 'get': state(again)}

    waiting = (await one(plain, request('wait', immediately=True))).task
    seen = []

    async def follow():
        async for r in streaming.subscribe(SubscribeToTaskRequest(id=waiting.id)):
            kind = r.WhichOneof('payload')
            if kind == 'task':
                seen.append(state(r.task))
            elif kind == 'status_update':
                seen.append(TaskState.Name(r.status_update.status.state))
            if len(seen) == 1:
                await plain.cancel_task(CancelTaskRequest(id=waiting.id))

    await asyncio.wait_for(follow(), TIMEOUT)
    out['subscribe'] = {'last': seen[-1] if seen else None}
    await http.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--url', required=True)
    ap.add_argument('--token', required=True)
    ap.add_argument('--hook', required=True)
    ap.add_argument('--binding', default='')
    args = ap.parse_args()
    try:
        out = asyncio.run(asyncio.wait_for(run(args), 60))
    except Exception as e:  # noqa: BLE001 - reported to the Go test
        print(json.dumps({'error': f'{type(e).__name__}: {e}'}))
        sys.exit(1)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
