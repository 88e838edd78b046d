"""A real webhook receiver on 127.0.0.1 for the tests and benchmarks of the webhooks (issue 64).

``http.server`` in a thread: every POST is kept (arrival time, path, headers, body, the status answered) before it is
answered, so a receiver that hangs or fails still shows when each try came. Used by the unit tests
(tests/unit/plugins/module_utils/notify), the cluster suite (tests/reliability/notify.py) and bench/notify.py.
"""
import http.server
import json
import socketserver
import threading
import time


class Receiver(object):
    """A receiver on 127.0.0.1.

    :param answer: callable(n, handler) -> the HTTP status of the n-th request (0-based), or None to close the
        connection without answering; it may block (a hanging receiver). Default: 200.
    :param port: int, 0 for any free port. :param path: str, the path of :attr:`url`.
    Attributes: ``url``; ``requests`` (list of dicts ``at``, ``path``, ``headers``, ``body`` bytes, ``status``),
    read under ``lock``.
    """

    def __init__(self, answer=lambda n, h: 200, port=0, path="/hook"):
        self.answer, self.requests, self.lock = answer, [], threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = {"headers": dict(self.headers), "body": body, "at": time.time(), "path": self.path,
                           "status": None}
                with owner.lock:
                    n = len(owner.requests)
                    owner.requests.append(request)
                status = owner.answer(n, self)
                request["status"] = status
                if status is None:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(status)
                if status in (429, 503) and getattr(self, "retry_after", None):
                    self.send_header("Retry-After", self.retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", port), Handler)
        self.url = "http://127.0.0.1:%d%s" % (self.server.server_address[1], path)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self):
        """The bodies received, parsed (list of dicts)."""
        with self.lock:
            return [json.loads(r["body"]) for r in self.requests]

    def close(self):
        """Stop listening."""
        self.server.shutdown()
        self.server.server_close()
