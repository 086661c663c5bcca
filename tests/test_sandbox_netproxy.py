"""``[agent] network = "allow"`` (the default, issue 11): at ``fs+net`` an agent stage's one way
out is andon's filtering proxy (``sandbox/netproxy.py`` on the host, ``netbridge.py`` inside).

The proxy is driven over its real Unix socket against real HTTP servers on 127.0.0.1, and then
through bubblewrap with a real stage: what the allow-list names is reached (through the proxy
and at a loopback port mirrored inside), anything else is refused with a 403, never reaches
its server, and is named in the stage's notes."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_sandbox_reach import site  # noqa: F401 - the fixture: a checkout, worktrees, HOME

from andon import sandbox
from andon.agents.process import run_process
from andon.config import Config
from andon.errors import InvalidValue
from andon.sandbox import netbridge, probe
from andon.sandbox.netproxy import (
    SOCKET_NAME,
    NetProxy,
    allows,
    hosts_in,
    loopback_mirrors,
    parse_entry,
)

# the site's store is a decoy (b"store", not a database)
pytestmark = pytest.mark.store_tampered

CAPS = probe.capabilities()


class Server:
    """An HTTP server on 127.0.0.1 answering every GET with its ``name``; ``hits`` counts
    the requests it saw (a refused request must never reach it)."""

    def __init__(self, name: str):
        self.name, self.hits, self.paths = name, 0, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                outer.paths.append(self.path)
                body = outer.name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    a, b = Server("allowed"), Server("not-allowed")
    yield a, b
    a.close()
    b.close()


@contextlib.contextmanager
def proxy_allowing(server: Server) -> Iterator[NetProxy]:
    """A running proxy whose allow-list is ``server``'s address; closed on the way out."""
    proxy = NetProxy([f"127.0.0.1:{server.port}"])
    try:
        yield proxy
    finally:
        proxy.close()


def ask(proxy: NetProxy, request: bytes) -> bytes:
    """Send one raw request to the proxy's socket; everything it answers until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(proxy.folder / SOCKET_NAME))
        s.sendall(request)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


# -- the allow-list --------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "parsed"), [
    ("api.anthropic.com", ("api.anthropic.com", (443, 80))),
    ("PyPI.org:8443", ("pypi.org", (8443,))),
    ("*.googleapis.com", ("*.googleapis.com", (443, 80))),
    ("[::1]:8080", ("::1", (8080,))),
    ("127.0.0.1:11434", ("127.0.0.1", (11434,))),
])
def test_an_entry_is_a_host_with_its_ports(entry, parsed):
    assert parse_entry(entry) == parsed


@pytest.mark.parametrize("entry", ["", "a b", "host:0", "host:99999", "host:x", "*.", "a*.b",
                                   "[::1]x", "http://host"])
def test_a_malformed_entry_is_refused_naming_it(entry):
    with pytest.raises(InvalidValue, match="allow_hosts"):
        parse_entry(entry)


def test_a_malformed_entry_in_andon_toml_is_refused_before_any_stage():
    with pytest.raises(ValueError, match="allow_hosts"):
        Config.model_validate({"agent": {"allow_hosts": ["pypi.org", "bad host"]}})


def test_hosts_ports_and_wildcards_match_as_documented():
    entries = ["api.openai.com", "*.example.org:8443", "127.0.0.1:9000"]
    assert allows(entries, "API.OpenAI.com", 443) and allows(entries, "api.openai.com.", 80)
    assert not allows(entries, "api.openai.com", 8443)
    assert not allows(entries, "evil-api.openai.com", 443)
    assert allows(entries, "a.b.example.org", 8443)
    assert not allows(entries, "example.org", 8443)          # the wildcard wants a sub-domain
    assert not allows(entries, "badexample.org", 8443)
    assert allows(entries, "127.0.0.1", 9000) and not allows(entries, "127.0.0.1", 9001)


def test_the_model_api_is_read_from_arguments_and_base_url_variables():
    words = ["--model", "x", "--openai-api-base", "http://127.0.0.1:4000/v1", "see https://a.b"]
    env = {"ANTHROPIC_BASE_URL": "https://gw.corp.example:8443/x", "HOME": "http://not.me",
           "OPENAI_API_BASE": "http://[::1]:5000"}
    assert hosts_in(words, env) == ["127.0.0.1:4000", "a.b:443", "gw.corp.example:8443",
                                    "[::1]:5000"]
    # a loopback model server with a port is mirrored inside; a remote host is not
    assert loopback_mirrors(["127.0.0.1:4000", "a.b:443", "[::1]:5000", "localhost"]) == [
        "127.0.0.1:4000", "[::1]:5000"]


# -- the proxy over its socket ---------------------------------------------------------

def test_an_allowed_host_is_reached_and_another_is_refused_and_recorded(servers):
    a, b = servers
    with proxy_allowing(a) as proxy:
        ok = ask(proxy, f"GET http://127.0.0.1:{a.port}/v1/x HTTP/1.1\r\n"
                        f"Host: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n".encode())
        no = ask(proxy, f"GET http://127.0.0.1:{b.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        far = ask(proxy, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n")
        bad = ask(proxy, b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n")
        notes = proxy.notes()
    assert ok.startswith(b"HTTP/1.0 200") and ok.endswith(b"allowed")
    assert a.paths == ["/v1/x"]                    # rewritten to origin form
    assert no.startswith(b"HTTP/1.1 403") and b"not in [agent] allow_hosts" in no
    assert far.startswith(b"HTTP/1.1 403")
    assert bad.startswith(b"HTTP/1.1 400")
    assert b.hits == 0
    assert proxy.refused == [f"127.0.0.1:{b.port}", "example.com:443", "/relative"]
    assert notes[0].startswith("network: andon's proxy refused ")
    assert f"127.0.0.1:{b.port}" in notes[0] and "example.com:443" in notes[0]
    assert notes[1] == f"network: through andon's proxy to 127.0.0.1:{a.port} ×1"
    assert not proxy.folder.exists()               # close() removed the socket's folder


def test_connect_tunnels_bytes_to_an_allowed_port_only(servers):
    a, _b = servers
    with proxy_allowing(a) as proxy:
        got = ask(proxy, f"CONNECT 127.0.0.1:{a.port} HTTP/1.1\r\nHost: x\r\n\r\n"
                         f"GET /through HTTP/1.0\r\n\r\n".encode())
    assert got.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    assert got.endswith(b"allowed") and a.paths == ["/through"]


def test_a_second_request_cannot_ride_an_allowed_connection(servers):
    """One request per connection: after the allowed one, a second request for another host
    on the same connection is never forwarded (the proxy forced ``Connection: close``)."""
    a, b = servers
    with proxy_allowing(a) as proxy:
        ask(proxy, f"GET http://127.0.0.1:{a.port}/1 HTTP/1.1\r\nHost: a\r\n\r\n"
                   f"GET http://127.0.0.1:{b.port}/2 HTTP/1.1\r\nHost: b\r\n\r\n".encode())
    assert b.hits == 0 and a.paths[0] == "/1"


def test_netbridge_refuses_a_bad_argv_with_exit_2(capsys):
    assert netbridge.main(["--socket", "/x"]) == 2
    assert netbridge.main(["--mirror", "nohostport", "--socket", "/x", "--", "true"]) == 2
    assert netbridge.main(["--what", "x", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "usage: netbridge.py" in err and "--mirror wants HOST:PORT" in err
    assert "unknown option --what" in err
    assert netbridge.parse(["--socket", "/s", "--mirror", "[::1]:80", "--", "cmd", "a"]) == (
        "/s", [("::1", 80)], ["cmd", "a"])


# -- inside the sandbox ----------------------------------------------------------------

FETCH = """\
import os, sys, urllib.request, urllib.error
def get(url, proxy=None):
    handler = urllib.request.ProxyHandler({"http": proxy} if proxy else {})
    try:
        return urllib.request.build_opener(handler).open(url, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return f"http {e.code}"
    except OSError as e:
        return f"oserror {type(e).__name__}"
proxy = os.environ["HTTP_PROXY"]
print("mirror:", get(sys.argv[1]))
print("direct:", get(sys.argv[2]))
for name in ("NO_PROXY", "no_proxy"):  # else urllib goes around the proxy for 127.0.0.1
    os.environ.pop(name)
print("via-proxy:", get(sys.argv[2], proxy))
print("far:", get("http://example.com/", proxy))
"""


@pytest.mark.skipif(not CAPS.net[0], reason=f"no fs+net here: {CAPS.net[1]}")
def test_a_stage_reaches_its_allowed_host_and_nothing_else(site, servers):  # noqa: F811
    """The default network setting at ``fs+net``: the allowed loopback server answers at its
    own port inside (mirrored), the other one is not there directly and is refused through
    the proxy, as is a host outside; the refusals are in the stage's network notes and no
    refused request reached a server."""
    a, b = servers
    config = Config.model_validate({"agent": {"allow_hosts": [f"127.0.0.1:{a.port}"]}})
    assert config.agent.network == "allow"         # the default
    assert sandbox.level_for(config) == "fs+net"   # auto, the default, reaches it here
    wt = site["wt"]
    script = site["prompt"] / "fetch.py"
    script.write_text(FETCH)
    plan = sandbox.plan_for("fs+net", config, site["repo"], wt, hidden=[wt.parent],
                            readonly=[site["prompt"], Path(sys.prefix)])
    assert plan.proxied
    out = site["tmp"] / "out.log"
    env = {"PATH": os.environ["PATH"], "HOME": str(site["home"]), "LANG": "C.UTF-8"}
    p = run_process([sys.executable, "-I", str(script), f"http://127.0.0.1:{a.port}/m",
                     f"http://127.0.0.1:{b.port}/d"], wt, env,
                    site["prompt"] / "implement.prompt.md", out, 60, sandbox=plan)
    text = out.read_text()
    assert p.exit_status == 0, text
    assert "mirror: allowed" in text
    assert "direct: oserror" in text               # nothing listens there inside
    assert "via-proxy: http 403" in text and "far: http 403" in text
    assert b.hits == 0 and a.paths == ["/m"]
    refused, passed = p.network
    assert f"127.0.0.1:{b.port}" in refused and "example.com:80" in refused
    assert passed == f"network: through andon's proxy to 127.0.0.1:{a.port} ×1"


def test_a_deep_temp_dir_still_gives_the_proxy_a_socket_it_can_bind(tmp_path, monkeypatch):
    """A Unix socket's path holds at most 107 bytes (unix(7)). Under a deep $TMPDIR (andon's
    own suite on the tmpfs: 128 bytes) binding the proxy's socket raised `OSError: AF_UNIX
    path too long` and every sandboxed agent stage of the run was a harness error. The
    folder then goes to a short temp dir, and the proxy answers."""
    import tempfile

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert len(os.fsencode(Path(tempfile.mkdtemp(dir=deep)) / SOCKET_NAME)) > 107
    server = Server("allowed")
    try:
        with proxy_allowing(server) as proxy:
            path = proxy.folder / SOCKET_NAME
            assert len(os.fsencode(path)) <= 107 and not path.is_relative_to(deep)
            got = ask(proxy, f"GET http://127.0.0.1:{server.port}/ HTTP/1.1\r\nHost: x\r\n\r\n"
                      .encode())
            assert got.startswith(b"HTTP/1.") and got.endswith(b"allowed"), got
        assert not proxy.folder.exists()
    finally:
        server.close()
