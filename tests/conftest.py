import socketserver
import sys
import threading
from pathlib import Path

import pytest

# tests/helpers.py holds the shared builders; make it importable as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))


class _Answer(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"answer")


@pytest.fixture
def outside_server():
    """A TCP server on 127.0.0.1 in the test's own network namespace that answers every
    connection with b"answer"; yields its port. Used to show what a test run cut off the
    network can and cannot reach."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answer) as srv:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        yield srv.server_address[1]
        srv.shutdown()
        t.join()
