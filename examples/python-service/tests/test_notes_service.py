"""Starts the service on an ephemeral loopback port and talks to it over HTTP."""

import json
import threading
import unittest
import urllib.error
import urllib.request

from notes_service import make_server


class NotesServiceTest(unittest.TestCase):
    def setUp(self):
        self.server = make_server(port=0)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        # Loopback needs no proxy; make sure urllib does not try one.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(req, timeout=10) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_health(self):
        self.assertEqual(self.request("GET", "/health"), (200, {"ok": True}))

    def test_add_and_list_notes(self):
        status, note = self.request("POST", "/notes", {"text": "  buy milk "})
        self.assertEqual(status, 201)
        self.assertEqual(note, {"id": 1, "text": "buy milk"})
        self.assertEqual(self.request("GET", "/notes"), (200, [note]))

    def test_rejects_empty_text(self):
        status, _ = self.request("POST", "/notes", {"text": "   "})
        self.assertEqual(status, 400)

    def test_unknown_path(self):
        status, _ = self.request("GET", "/nope")
        self.assertEqual(status, 404)


if __name__ == "__main__":
    unittest.main()
