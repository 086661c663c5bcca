"""Serving the dashboard: a socket on 127.0.0.1 (port 0 picks a free one), uvicorn on it,
in the foreground (``andon serve``) or on a thread (the tests, ``andon demo --serve``)."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass

import uvicorn

from .app import Settings, create_app

HOST = "127.0.0.1"


def bind(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:``port`` (0: a free port).

    Raises:
        OSError: the port is taken or not allowed.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


@dataclass
class Running:
    """A server started by :func:`start`: its base ``url``, the ``login`` URL carrying the
    token, and ``stop()``."""

    url: str
    login: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _server(settings: Settings) -> uvicorn.Server:
    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False,
                            lifespan="off")
    return uvicorn.Server(config)


def urls(sock: socket.socket, settings: Settings) -> tuple[str, str]:
    """(base URL, URL with the token) of a server on ``sock``."""
    url = f"http://{HOST}:{sock.getsockname()[1]}"
    return url, f"{url}/t/{settings.token}/"


def serve_forever(settings: Settings, sock: socket.socket) -> None:
    """Serve on ``sock`` until interrupted (Ctrl-C)."""
    asyncio.run(_server(settings).serve(sockets=[sock]))


def start(settings: Settings, port: int = 0) -> Running:
    """Serve on a thread. The socket listens before this returns, so a client may connect
    at once: the kernel holds the connection until uvicorn accepts it (no waiting here)."""
    sock = bind(port)
    server = _server(settings)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])),
                              daemon=True, name="andon-serve")
    thread.start()
    url, login = urls(sock, settings)
    return Running(url, login, server, thread)
