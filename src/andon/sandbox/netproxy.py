"""The host side of ``[agent] network = "allow"``: a filtering HTTP proxy on a Unix socket.

An agent stage at ``fs+net`` has its own network namespace with loopback only; its one way
out is this proxy, whose Unix socket is bound into the sandbox (``Plan.wrap``) and served
inside on a loopback port by ``netbridge.py``. It runs in a thread of andon's process for
the length of one stage and answers, per connection, one request in the forms RFC 9110
gives a proxy:

- ``CONNECT host:port`` (§9.3.6; HTTPS through ``HTTPS_PROXY``): when ``host:port`` is
  allowed, andon resolves and connects, answers ``200`` and then copies bytes both ways
  (the TLS stays end to end: andon sees only the host name and the byte counts);
- an absolute-form request (``GET http://host:port/path``, §7.1; plain HTTP through
  ``HTTP_PROXY``): when allowed, the request line is rewritten to origin form, a
  ``Connection: close`` is forced (one request per connection: no second host can ride a
  kept-alive connection) and the rest is copied both ways.

Anything else — a host not on the list, another method, a malformed head — is answered
``403`` (or ``400``) and *recorded*: :attr:`NetProxy.refused` holds ``host:port`` strings in
order, and the stage's evidence names them. No well-kept proxy fitted the one constraint
that matters here: it must listen on a Unix socket (a TCP port on the host cannot be reached
from the agent's network namespace), and tinyproxy, the small filtering one Debian ships,
listens on TCP only; this one is a host list and a byte copy, and nothing else.

Allow-list entries (:func:`parse_entry`): ``host`` (ports 443 and 80), ``host:port``,
``*.domain`` (any sub-domain, ports 443 and 80) or ``*.domain:port``; hosts compare without
case; an IPv6 address is written in brackets (``[::1]:8080``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import socketserver
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import InvalidValue

DEFAULT_PORTS = (443, 80)
HEAD_LIMIT = 16 * 1024      # bytes of request head read before a request is refused
CONNECT_TIMEOUT_S = 15.0
CHUNK = 64 * 1024
SOCKET_NAME = "proxy.sock"
# how often the serving thread looks for close(): close() waits up to this long, once per
# stage (0.2 s was half of the proxy's whole cost per stage start, benchmarks/sandbox.py)
POLL_S = 0.02


def parse_entry(entry: str) -> tuple[str, tuple[int, ...]]:
    """``(host, ports)`` of one allow-list entry, host lower-cased (brackets removed from an
    IPv6 address; ``*.`` kept as the sub-domain wildcard).

    Raises:
        InvalidValue: not ``host``, ``host:port``, ``*.domain[:port]`` or ``[v6][:port]``.
    """
    e = entry.strip().lower()
    host, port = e, ""
    if e.startswith("["):
        host, _, rest = e[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise InvalidValue(f'[agent] allow_hosts: "{entry}" is not host, host:port or '
                               '[ipv6]:port')
        port = rest[1:]
    elif e.count(":") == 1:
        host, port = e.split(":")
    wild = host.startswith("*.")
    name = host[2:] if wild else host
    ok_name = bool(name) and all(c.isalnum() or c in "-._:" for c in name) \
        and "*" not in name
    if not ok_name or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise InvalidValue(f'[agent] allow_hosts: "{entry}" is not host, host:port, '
                           '*.domain or [ipv6]:port (port 1-65535)')
    return host, (int(port),) if port else DEFAULT_PORTS


def allows(entries: Iterable[str], host: str, port: int) -> bool:
    """True when ``host:port`` matches one of ``entries`` (see the module docstring)."""
    h = host.strip().lower().strip("[]").rstrip(".")
    for e in entries:
        pattern, ports = parse_entry(e)
        if port not in ports:
            continue
        if pattern.startswith("*."):
            if h.endswith(pattern[1:]) and len(h) > len(pattern) - 1:
                return True
        elif h == pattern:
            return True
    return False


LOOPBACK = ("127.0.0.1", "localhost", "::1")
# the variables a model API's address is given in (ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL,
# OPENAI_BASE_URL, OPENAI_API_BASE, OLLAMA_API_BASE, ...)
URL_VARIABLES = ("BASE_URL", "API_BASE")
_URL = re.compile(r"https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?", re.ASCII)


def hosts_in(words: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """The ``host:port`` of every http(s) URL in ``words`` (an agent CLI's arguments, from
    andon.toml: ``--openai-api-base URL``, ``base_url="URL"``) and in the ``env`` variables
    whose names hold ``BASE_URL`` or ``API_BASE`` — where the agent is told its model API
    lives. In order, without repeats."""
    texts = [*words, *(v for k, v in env.items() if any(n in k.upper() for n in URL_VARIABLES))]
    out: list[str] = []
    for text in texts:
        for m in _URL.finditer(text):
            host = m.group(1).lower()
            port = m.group(2) or ("443" if m.group(0).lower().startswith("https") else "80")
            out.append(f"{host}:{port}")
    return list(dict.fromkeys(out))


def loopback_mirrors(entries: Iterable[str]) -> list[str]:
    """``host:port`` of each entry that names a loopback host with a port: served at the same
    port on the sandbox's own loopback (``netbridge.py --mirror``)."""
    out = []
    for e in entries:
        host, ports = parse_entry(e)
        if host in LOOPBACK and ports != DEFAULT_PORTS:
            out.append(f"[{host}]:{ports[0]}" if ":" in host else f"{host}:{ports[0]}")
    return list(dict.fromkeys(out))


# sockaddr_un.sun_path holds 108 bytes on Linux, the terminating NUL included (unix(7))
SUN_PATH_MAX = 107


def socket_folder() -> Path:
    """A new private folder (``mkdtemp``) whose ``SOCKET_NAME`` path fits a Unix socket
    address: in the temp dir, else, when that path is too long (a deep ``$TMPDIR``), in
    ``/tmp``, ``/dev/shm`` or ``/var/tmp``. OSError when none of them gives one."""
    for base in (None, "/tmp", "/dev/shm", "/var/tmp"):
        try:
            folder = Path(tempfile.mkdtemp(prefix="andon-net-", dir=base))
        except OSError:
            continue
        if len(os.fsencode(folder / SOCKET_NAME)) <= SUN_PATH_MAX:
            return folder
        folder.rmdir()
    raise OSError(f"no temp folder gives a Unix socket path of at most {SUN_PATH_MAX} bytes "
                  f"for the agent's network proxy (the temp dir: {tempfile.gettempdir()})")


class NetProxy:
    """One stage's proxy. ``NetProxy(allow)`` makes a private folder holding the socket
    (:attr:`folder`, bound into the sandbox) and serves it in a daemon thread; :meth:`close`
    stops it and removes the folder. :attr:`refused`: ``"host:port"`` of every refused
    request, in order; :attr:`passed`: a count of ``"host:port"`` connected to.

    Raises:
        InvalidValue: an entry of ``allow`` is malformed (checked before anything starts).
        OSError: the socket cannot be made.
    """

    def __init__(self, allow: Iterable[str]):
        self.allow = tuple(allow)
        for e in self.allow:
            parse_entry(e)
        self.refused: list[str] = []
        self.passed: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()  # closed by close(): no copier outlives it
        self.folder = socket_folder()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        try:
            self._server = Server(str(self.folder / SOCKET_NAME), Handler)
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        # the sandbox's uid may map to another user than andon's (uid 65534 inside)
        os.chmod(self.folder, 0o755)
        os.chmod(self.folder / SOCKET_NAME, 0o777)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": POLL_S}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving (connections in flight are dropped) and remove the folder."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            self._open.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def notes(self) -> list[str]:
        """Lines for the stage's evidence: what was refused (each host once, with a count),
        then what passed."""
        out = []
        if self.refused:
            counts = Counter(self.refused)
            out.append("network: andon's proxy refused " + ", ".join(
                f"{h}" + (f" ×{n}" if n > 1 else "") for h, n in counts.items())
                + " (not in [agent] allow_hosts or the agent's model API)")
        if self.passed:
            out.append("network: through andon's proxy to " + ", ".join(
                f"{h} ×{n}" for h, n in sorted(self.passed.items())))
        return out

    # -- one connection -----------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(CONNECT_TIMEOUT_S)
        try:
            got = _read_head(client)
        except OSError:
            return
        if got is None:
            return
        head, rest = got
        lines = head.split(b"\r\n")
        parts = lines[0].decode("latin-1").split()
        if len(parts) != 3:
            _answer(client, 400, "a proxy request line is METHOD TARGET VERSION")
            return
        method, target, version = parts
        try:
            host, port, path = _target(method, target)
        except InvalidValue as exc:
            self._refuse(client, target, 400, str(exc))
            return
        where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        if not allows(self.allow, host, port):
            self._refuse(client, where, 403, f"{where} is not in [agent] allow_hosts")
            return
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            _answer(client, 502, f"andon's proxy could not reach {where}: {exc}")
            return
        with self._lock:
            self.passed[where] += 1
            self._open.update((client, upstream))
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                kept = [h for h in lines[1:] if h and not h.lower().startswith(
                    (b"connection:", b"proxy-connection:", b"keep-alive:"))]
                first = f"{method} {path} {version}".encode("latin-1")
                upstream.sendall(b"\r\n".join([first, *kept, b"Connection: close"])
                                 + b"\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            _pipe(client, upstream)
        with self._lock:
            self._open.difference_update((client, upstream))

    def _refuse(self, client: socket.socket, where: str, status: int, why: str) -> None:
        with self._lock:
            self.refused.append(where)
        _answer(client, status, why)


def _read_head(s: socket.socket) -> tuple[bytes, bytes] | None:
    """``(head, bytes after it)``, or None when the peer closed or sent more than
    ``HEAD_LIMIT`` bytes before a complete head."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk or len(buf) > HEAD_LIMIT:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _target(method: str, target: str) -> tuple[str, int, str]:
    """``(host, port, origin-form path)`` of a proxy request.

    Raises:
        InvalidValue: not a request andon forwards (another method, no host or port)."""
    if method == "CONNECT":
        hostport, path = target, ""
        default = 443
    elif target.lower().startswith("http://"):
        rest = target[7:]
        hostport, slash, tail = rest.partition("/")
        path, default = slash + tail or "/", 80
    else:
        raise InvalidValue(f"only CONNECT and absolute http:// requests, not {method} {target}")
    if hostport.startswith("["):
        host, _, p = hostport[1:].partition("]")
        p = p[1:]
    else:
        host, _, p = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host or (p and not p.isdigit()):
        raise InvalidValue(f"no host and port in {target}")
    return host.lower(), int(p) if p else default, path


def _answer(client: socket.socket, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"andon: {why}\n".encode()
    with contextlib.suppress(OSError):
        client.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
                       f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                       + body)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    a.settimeout(None)
    b.settimeout(None)

    def one_way(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=one_way, args=(b, a), daemon=True)
    t.start()
    one_way(a, b)
    t.join()
