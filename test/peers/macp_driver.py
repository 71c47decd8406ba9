"""Drives a MACP runtime (or Warden in front of one) with the real MACP Python SDK.

usage: macp_driver.py [--pretty] TARGET SCRIPT.json

SCRIPT is a JSON object {"tokens": {agent: bearer}, "steps": [...]}; each step
is one call made with the SDK's MacpClient:

  {"as": "agent", "session": "A", "mode": "...", "type": "TaskRequest",
   "payload_type": "task.TaskRequest", "payload": {...},
   "sender": "override the envelope sender", "message_id": "fixed id"}
  {"as": "agent", "op": "ListSessions"}
  {"as": "agent", "op": "CancelSession", "session": "A"}
  {"as": "agent", "op": "stream", "session": "A", "messages": [{"mode", "type",
   "payload_type", "payload"}, ...]}   (one StreamSession; per message: echoed or inline error)

Session names map to fresh UUIDv4 session ids; a name that is itself a UUID
is used as is (to reach one session from several runs). One JSON line per step is
printed: {"i", "ok", "duplicate", "code", "message", "sessions", "results"}; with --pretty,
a line a person reads instead (a step may carry a "say" caption).
"""

import json
import sys
import time
import uuid

import grpc
from google.protobuf import json_format

from macp.modes.decision.v1 import decision_pb2
from macp.modes.handoff.v1 import handoff_pb2
from macp.modes.multi_round.v1 import multi_round_pb2
from macp.modes.proposal.v1 import proposal_pb2
from macp.modes.quorum.v1 import quorum_pb2
from macp.modes.task.v1 import task_pb2
from macp.v1 import core_pb2, policy_pb2
from macp_sdk import AuthConfig, MacpClient
from macp_sdk.envelope import build_envelope
from macp_sdk.errors import MacpAckError

PAYLOADS = {
    "SessionStart": core_pb2.SessionStartPayload,
    "Commitment": core_pb2.CommitmentPayload,
    "task": task_pb2,
    "handoff": handoff_pb2,
    "decision": decision_pb2,
    "proposal": proposal_pb2,
    "quorum": quorum_pb2,
    "multi_round": multi_round_pb2,
}


def payload_bytes(payload_type, payload):
    if "." in payload_type:
        module, name = payload_type.split(".", 1)
        cls = getattr(PAYLOADS[module], name + "Payload")
    else:
        cls = PAYLOADS[payload_type]
    return json_format.ParseDict(payload or {}, cls(), ignore_unknown_fields=False).SerializeToString()


def stream(client, auth_cfg, session_id, step):
    """Sends step["messages"] on one StreamSession and reports, per message,
    whether the runtime echoed it (accepted) or answered an inline error."""
    errors = {}
    st = client.open_stream(auth=auth_cfg)
    st.on_inline_error(lambda e: errors.__setitem__(e.message_id, e.code or "ERROR"))
    results = []
    try:
        for n, m in enumerate(step["messages"]):
            mid = "%s-s%d-%s" % (step["as"], n, uuid.uuid4().hex[:8])
            st.send(build_envelope(
                mode=m["mode"], message_type=m["type"], session_id=session_id,
                payload=payload_bytes(m["payload_type"], m.get("payload")),
                sender=m.get("sender", step["as"]), message_id=mid))
            res = {"type": m["type"], "ok": False, "code": "TIMEOUT"}
            deadline = time.time() + 5
            while time.time() < deadline:
                if mid in errors:
                    res["code"] = errors[mid]
                    break
                try:
                    env = st.read(timeout=0.1)
                except Exception:
                    continue
                if env is not None and env.message_id == mid:
                    res = {"type": m["type"], "ok": True, "code": ""}
                    break
            results.append(res)
    finally:
        st.close()
    return results


def subscribe(client, auth_cfg, session_id):
    """Subscribes to a session's history: reports how many envelopes came, or
    the inline error."""
    errors = []
    st = client.open_stream(auth=auth_cfg)
    st.on_inline_error(lambda e: errors.append(e.code or "ERROR"))
    st.send_subscribe(session_id)
    received = 0
    deadline = time.time() + 2
    try:
        while time.time() < deadline and not errors:
            try:
                env = st.read(timeout=0.1)
            except Exception:
                continue
            if env is not None:
                received += 1
    finally:
        st.close()
    if errors:
        return {"ok": False, "code": errors[0], "received": received}
    return {"ok": True, "received": received}


def describe(step):
    if step.get("op"):
        return "%s %s %s" % (step["as"], step["op"], step.get("session", ""))
    who = step["as"]
    if step.get("sender") and step["sender"] != who:
        who = "%s (envelope says %s)" % (who, step["sender"])
    return "%-28s %-15s session %s" % (who, step["type"], step["session"])


def main():
    args = sys.argv[1:]
    pretty = args and args[0] == "--pretty"
    if pretty:
        args = args[1:]
    target, script_path = args[0], args[1]
    with open(script_path) as f:
        script = json.load(f)
    tokens = script.get("tokens") or {}
    sessions = {}
    client = MacpClient(target=target, allow_insecure=True, default_timeout=15)

    def auth(agent):
        return AuthConfig.for_bearer(tokens.get(agent, agent), sender_hint=agent)

    def sid(name):
        if len(name) == 36 and name.count("-") == 4:  # a literal session id
            return name
        if name not in sessions:
            sessions[name] = str(uuid.uuid4())
        return sessions[name]

    for i, step in enumerate(script["steps"]):
        out = {"i": i, "ok": False, "duplicate": False, "code": "", "message": ""}
        try:
            op = step.get("op")
            if op == "ListSessions":
                resp = client.stub.ListSessions(core_pb2.ListSessionsRequest(), metadata=auth(step["as"]).metadata(), timeout=15)
                names = {v: k for k, v in sessions.items()}
                out["ok"] = True
                out["sessions"] = sorted(names.get(s.session_id, "?") for s in resp.sessions if s.session_id in names)
            elif op == "RegisterPolicy":
                pd = policy_pb2.PolicyDescriptor(policy_id=step["policy_id"], mode=step["policy_mode"],
                                                 description="test", rules=json.dumps(step["rules"]), schema_version=2)
                resp = client.stub.RegisterPolicy(policy_pb2.RegisterPolicyRequest(policy_descriptor=pd),
                                                  metadata=auth(step["as"]).metadata(), timeout=15)
                out["ok"] = resp.ok
                out["message"] = resp.error
            elif op == "subscribe":
                out.update(subscribe(client, auth(step["as"]), sid(step["session"])))
            elif op == "stream":
                out["results"] = stream(client, auth(step["as"]), sid(step["session"]), step)
                out["ok"] = True
            elif op in ("CancelSession", "SuspendSession", "ResumeSession"):
                req = getattr(core_pb2, op + "Request")(session_id=sid(step["session"]), reason="driver")
                resp = getattr(client.stub, op)(req, metadata=auth(step["as"]).metadata(), timeout=15)
                out["ok"] = resp.ack.ok
                out["code"] = resp.ack.error.code
                out["message"] = resp.ack.error.message
            else:
                env = build_envelope(
                    mode=step["mode"],
                    message_type=step["type"],
                    session_id=sid(step["session"]),
                    payload=payload_bytes(step["payload_type"], step.get("payload")),
                    sender=step.get("sender", step["as"]),
                    message_id=step.get("message_id"),
                )
                ack = client.send(env, auth=auth(step["as"]), raise_on_nack=False)
                out["ok"] = ack.ok
                out["duplicate"] = ack.duplicate
                out["code"] = ack.error.code
                out["message"] = ack.error.message
        except grpc.RpcError as e:  # a call that failed with a gRPC status
            out["code"] = "GRPC_" + e.code().name
            out["message"] = e.details() or ""
        except MacpAckError as e:  # a NACK the SDK read from a status and its macp-error-code (a call refused at the door)
            out["code"] = e.failure.code
            out["message"] = e.failure.message
        except Exception as e:  # the SDK refused or failed: report it, do not hide it
            out["code"] = "SDK_" + type(e).__name__
            out["message"] = str(e)
        if pretty:
            if step.get("say"):
                print("\n# " + step["say"])
            verdict = "accepted" if out["ok"] else "REFUSED %s: %s" % (out["code"], out["message"])
            if "sessions" in out:
                verdict = "sees sessions %s" % (out["sessions"] or "none")
            print("  %s -> %s" % (describe(step), verdict), flush=True)
        else:
            print(json.dumps(out), flush=True)
    client.close()


if __name__ == "__main__":
    main()
