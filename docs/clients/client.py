#!/usr/bin/env python3
"""A toolrun serve client in Python, standard library only.

It asks for a file to be read, which the server runs with
--require-approval read_file, so the run ends with an interrupt; it
approves the call and streams the run that goes on. Every HTTP error
prints its JSON body ({"error": {"code", "message"}}), so you see why.
Each run uses new thread and run ids, so it can run again and again.

    toolrun serve --script serve/testdata/agui-client/scenes.jsonl \
        --workdir serve/testdata/agui-client/files --require-approval read_file &
    python3 docs/clients/client.py http://127.0.0.1:8080/
"""
import json
import sys
import urllib.error
import urllib.request
import uuid

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/"


def post(body):
    """POSTs body and returns the SSE events, or None after printing the error body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(URL, data=data, headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    try:
        with urllib.request.urlopen(req) as resp:
            events = []
            for line in resp:
                line = line.decode().rstrip("\n")
                if line.startswith("data:"):
                    ev = json.loads(line[5:].strip())
                    events.append(ev)
                    print("  event", ev["type"], ev.get("delta", ""))
            return events
    except urllib.error.HTTPError as e:
        print(f"  HTTP {e.code}: {e.read().decode().strip()}")
        return None


thread = "py-" + uuid.uuid4().hex
messages = [{"id": "u1", "role": "user", "content": "read it"}]
print("run 1: ask")
events = post({"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": [], "context": [], "state": {}, "forwardedProps": {}, "protocolVersion": "1.0"})
if events is None:
    sys.exit(1)
finished = events[-1]
outcome = finished.get("outcome", {})
if outcome.get("type") != "interrupt":
    print("no interrupt:", finished)
    sys.exit(1)
interrupt = outcome["interrupts"][0]
print("interrupt", interrupt["id"], "for call", interrupt.get("toolCallId"), "-", interrupt.get("message", ""))

print("run 2: approve")
events = post({"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": [], "context": [], "state": {}, "forwardedProps": {}, "protocolVersion": "1.0",
               "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "approve"}}]})
if events is None:
    sys.exit(1)
print("answer:", "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"))

print("an error, on purpose: a body that is not JSON")
post(b'{"threadId":')
