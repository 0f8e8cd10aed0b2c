"""The hello backend of examples/hello/main.go, in Python (standard library only).

It verifies every delivery's signature, then answers the greet tool: it
greets the name it is given, asks for one when there is none (webhook-driven
input, with its own state between rounds), and greets formally when a
declared input says so.

    WEBHOOK_SECRET=whsec_... python3 examples/hello/hello.py 127.0.0.1:9000
"""

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE = 300  # seconds a signature stays valid: replays fail after it


def verified(secrets, header, body, now=None):
    """Check Opsmcp-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">."""
    now = time.time() if now is None else now
    t, sigs = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            t = value
        elif key == "v1":
            sigs.append(value)
    if t is None or not t.isdigit() or not sigs or abs(now - int(t)) > TOLERANCE:
        return False
    for secret in secrets:
        if not secret:
            continue
        want = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(want, sig) for sig in sigs):
            return True
    return False


def text(s):
    return {"type": "complete", "result": {"content": [{"type": "text", "text": s}]}}


def greet(req):
    name = (req.get("arguments") or {}).get("name", "")
    if not name and req.get("state") == "asked-name":
        # The answer to the question this backend asked last round.
        who = (req.get("inputResponses") or {}).get("who", {})
        if who.get("action") != "accept":
            return text("Nobody to greet.")
        name = who.get("content", {}).get("name", "")
    if not name:
        # Ask the user; the platform seals the state and hands it back
        # with the answer on the retry.
        return {"type": "input_required", "state": "asked-name", "inputRequests": {"who": {
            "method": "elicitation/create",
            "params": {"message": "Who should I greet?", "requestedSchema": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "title": "Name"}}}}}}}
    greeting = f"Hello, {name}!"
    # A declared input: the platform asked it before calling.
    style = (req.get("answers") or {}).get("style", {})
    if style.get("action") == "accept" and style.get("content", {}).get("style") == "formal":
        greeting = f"Good day, {name}."
    caller = (req.get("principal") or {}).get("subject") or "an anonymous caller"
    return text(f"{greeting} (asked by {caller})")


class Hook(BaseHTTPRequestHandler):
    secrets = os.environ.get("WEBHOOK_SECRET", "").split(",")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20))
        if self.path != "/hook" or not verified(self.secrets, self.headers.get("Opsmcp-Signature", ""), body):
            self.send_error(401, "bad signature")
            return
        req = json.loads(body)
        if req.get("version") != "1":
            self.send_error(400, "not a v1 delivery")
            return
        out = json.dumps(greet(req)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format, *args):
        pass  # quiet, like the Go version


if __name__ == "__main__":
    host, _, port = (sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9000").rpartition(":")
    print(f"hello backend on http://{host}:{port}/hook", file=sys.stderr, flush=True)
    ThreadingHTTPServer((host, int(port)), Hook).serve_forever()
