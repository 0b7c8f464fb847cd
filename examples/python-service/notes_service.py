"""A small notes service on http.server, no third-party packages.

    GET  /health       -> {"ok": true}
    GET  /notes        -> [{"id": 1, "text": "..."}, ...]
    POST /notes        {"text": "..."} -> 201 and the new note

Run it with `python3 notes_service.py [PORT]`.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 64 * 1024


class NoteStore:
    """Notes kept in memory, safe to use from several request threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._notes = []

    def add(self, text):
        with self._lock:
            note = {"id": len(self._notes) + 1, "text": text}
            self._notes.append(note)
            return note

    def all(self):
        with self._lock:
            return list(self._notes)


def make_handler(store):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, {"ok": True})
            elif self.path == "/notes":
                self._send(200, store.all())
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):
            if self.path != "/notes":
                self._send(404, {"error": "not found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": "body too large"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                self._send(400, {"error": "body must be JSON"})
                return
            text = body.get("text") if isinstance(body, dict) else None
            if not isinstance(text, str) or not text.strip():
                self._send(400, {"error": "text is required"})
                return
            self._send(201, store.add(text.strip()))

        def log_message(self, format, *args):
            pass

    return Handler


def make_server(host="127.0.0.1", port=8000):
    return ThreadingHTTPServer((host, port), make_handler(NoteStore()))


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    server = make_server(port=port)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}")
    server.serve_forever()
