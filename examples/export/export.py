"""A backend whose tool runs longer than one delivery: it accepts the call
as a task and reports on it later (standard library only). main.go beside
it is the same backend in Go; docs/tasks.md walks through both.

The export tool exports a month of orders: it reports its progress, asks
which format to write midway, and finishes with the file's summary. A
cancel stops it.

    WEBHOOK_SECRET=whsec_... python3 examples/export/export.py 127.0.0.1:9100
"""

import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE = 300  # seconds a signature stays valid
STEP = float(os.environ.get("EXPORT_STEP_SECONDS", "0.5"))


def signature(secret, body, now=None):
    """Opsmcp-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">."""
    t = str(int(time.time() if now is None else now))
    mac = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verified(secrets, header, body):
    t, sigs = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            t = value
        elif key == "v1":
            sigs.append(value)
    if t is None or not t.isdigit() or not sigs or abs(time.time() - int(t)) > TOLERANCE:
        return False
    for secret in secrets:
        want = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
        if secret and any(hmac.compare_digest(want, sig) for sig in sigs):
            return True
    return False


class Export:
    """One accepted export: the task the platform offered, and what the
    client has told it since (its answers, a cancel)."""

    def __init__(self, task, month):
        self.task, self.month, self.seq = task, month, 0
        self.answers, self.cancelled = {}, threading.Event()
        self.news = threading.Condition()

    def report(self, report):
        # Reports go in order, each with the next seq: sent again, one
        # the platform already applied is acknowledged and ignored.
        self.seq += 1
        body = json.dumps(dict(report, seq=self.seq)).encode()
        req = urllib.request.Request(self.task["reportUrl"], data=body, method="POST", headers={
            "Content-Type": "application/json",
            "Opsmcp-Signature": signature(self.task["secret"], body)})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.load(resp)["status"]
        except urllib.error.HTTPError as e:
            return "refused: " + e.read().decode()  # 409: the task is over

    def wait_for(self, key):
        with self.news:
            self.news.wait_for(lambda: key in self.answers or self.cancelled.is_set())
        return self.answers.get(key)

    def run(self):
        for step, what in enumerate(["orders read", "totals computed"], 1):
            if self.cancelled.wait(STEP):
                return
            self.report({"type": "progress", "progress": step, "total": 3,
                         "message": f"{self.month}: {what}"})
        self.report({"type": "input_required", "message": "Which format?", "inputRequests": {"format": {
            "method": "elicitation/create", "params": {"mode": "form", "message": f"Write the {self.month} export as?",
                "requestedSchema": {"type": "object", "required": ["format"], "properties": {
                    "format": {"type": "string", "enum": ["csv", "json"], "title": "Format"}}}}}}})
        answer = self.wait_for("format")
        if answer is None:
            return  # cancelled while it waited
        if answer.get("action") != "accept":
            self.report({"type": "complete", "result": {"content": [{"type": "text", "text": "Export stopped: no format chosen."}]}})
            return
        fmt = answer["content"]["format"]
        if self.cancelled.wait(STEP):
            return
        self.report({"type": "complete", "result": {"content": [{"type": "text",
            "text": f"Exported {self.month} as {fmt}: 1,204 orders, 88 KB."}]}})


exports = {}


def deliver(req):
    task = req.get("task") or {}
    if req["kind"] == "task_input":  # the client answered the task's question
        e = exports.get(task["id"])
        if e:
            with e.news:
                e.answers.update(req.get("inputResponses") or {})
                e.news.notify_all()
        return None
    if req["kind"] == "task_cancel":  # the client or an admin cancelled it
        e = exports.get(task["id"])
        if e:
            e.cancelled.set()
            with e.news:
                e.news.notify_all()
        return None
    if not task:  # not offered as a task: the client cannot follow one
        return {"type": "complete", "result": {"isError": True,
            "content": [{"type": "text", "text": "An export runs only as a task."}]}}
    e = exports[task["id"]] = Export(task, (req.get("arguments") or {}).get("month", "this month"))
    threading.Thread(target=e.run, daemon=True).start()
    return {"type": "accepted", "message": f"Export of {e.month} queued"}


class Hook(BaseHTTPRequestHandler):
    secrets = os.environ.get("WEBHOOK_SECRET", "").split(",")

    def do_POST(self):
        body = self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 1 << 20))
        if self.path != "/hook" or not verified(self.secrets, self.headers.get("Opsmcp-Signature", ""), body):
            self.send_error(401, "bad signature")
            return
        out = deliver(json.loads(body))
        if out is None:
            self.send_response(204)
            self.end_headers()
            return
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    host, _, port = (sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9100").rpartition(":")
    print(f"export backend on http://{host}:{port}/hook", file=sys.stderr, flush=True)
    ThreadingHTTPServer((host, int(port)), Hook).serve_forever()
