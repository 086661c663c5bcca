"""The sandbox side of ``[agent] network = "allow"``: loopback ports that lead to andon's proxy.

Run inside the agent's bubblewrap (its own network namespace, loopback only), isolated like
``launch.py`` (``python -I -S netbridge.py``: the tree the agent works in cannot replace it)::

    netbridge.py --socket PATH [--mirror HOST:PORT]... -- command [args...]

Before anything runs it listens on the namespace's loopback: on a free port ``P`` whose
connections are copied to the proxy's Unix socket ``PATH`` (``netproxy.py``, on the host),
and on each ``--mirror`` port, whose connections are sent through the proxy as ``CONNECT
HOST:PORT`` — so a model server on the host's loopback (a local model, the demo's scripted
server) answers at the same ``http://127.0.0.1:PORT`` inside. Then it forks: the child
serves those ports — forked twice, so it is no child of the command, and it ends with the
sandbox's pid namespace when the command exits; the parent sets ``HTTPS_PROXY`` and
``HTTP_PROXY`` (and the lower-case names) to ``http://127.0.0.1:P`` and ``NO_PROXY`` to the
loopback names, then execs the command: same pid, so the caller's wait and kill work
unchanged. The proxy decides what passes; this file
only moves bytes. Exit 125 when a port cannot be opened, 127 when the command cannot be
executed, 2 for a bad argv.
"""

import os
import signal
import socket
import sys
import threading

SETUP_FAILED = 125
CHUNK = 64 * 1024
LOOPBACK_NAMES = "localhost,127.0.0.1,::1"


def parse(argv):
    """``(socket path, [(host, port)], command)`` of a good argv, else the one-line problem
    (a ``str``). Nothing is raised: this runs isolated, outside andon's error tree."""
    if "--" not in argv:
        return "usage: netbridge.py --socket PATH [--mirror HOST:PORT]... -- cmd"
    cut = argv.index("--")
    opts, cmd = argv[:cut], argv[cut + 1:]
    if not cmd or len(opts) % 2:
        return "netbridge.py: bad arguments"
    path, mirrors = None, []
    for key, value in zip(opts[::2], opts[1::2], strict=True):
        if key == "--socket":
            path = value
        elif key == "--mirror":
            host, _, port = value.rpartition(":")
            if not (host and port.isdigit()):
                return f"netbridge.py: --mirror wants HOST:PORT, not {value}"
            mirrors.append((host.strip("[]"), int(port)))
        else:
            return f"netbridge.py: unknown option {key}"
    if path is None:
        return "netbridge.py: --socket is required"
    return path, mirrors, cmd


def pipe(a, b):
    """Copy bytes both ways until either side closes, then close both."""
    def one_way(src, dst):
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    t = threading.Thread(target=one_way, args=(b, a), daemon=True)
    t.start()
    one_way(a, b)
    t.join()
    a.close()
    b.close()


def to_proxy(path, client, connect_to):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(path)
        if connect_to:  # a mirror: ask the proxy for the tunnel first
            up.sendall(f"CONNECT {connect_to} HTTP/1.1\r\nHost: {connect_to}\r\n\r\n"
                       .encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = up.recv(4096)
                if not chunk or len(head) > 16384:
                    raise OSError("the proxy closed the tunnel")
                head += chunk
            status, _, rest = head.partition(b"\r\n\r\n")
            if status.split(b" ")[1:2] != [b"200"]:
                raise OSError("the proxy refused the tunnel")
            if rest:
                client.sendall(rest)
    except OSError:
        client.close()
        up.close()
        return
    pipe(client, up)


def serve(listener, path, connect_to):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=to_proxy, args=(path, client, connect_to), daemon=True).start()


def listen(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(64)
    return s


def main(argv):
    parsed = parse(argv)
    if isinstance(parsed, str):
        sys.stderr.write(f"{parsed}\n")
        return 2
    path, mirrors, cmd = parsed
    try:
        proxy = listen("127.0.0.1", 0)
        served = [(proxy, "")]  # "": the proxy port itself, no tunnel to ask for
        for host, port in mirrors:
            target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            served.append((listen("127.0.0.1", port), target))
            try:  # "localhost" may resolve to ::1 first
                served.append((listen("::1", port, socket.AF_INET6), target))
            except OSError:
                pass
    except OSError as exc:
        sys.stderr.write(f"andon.sandbox: cannot open the network bridge: {exc}\n")
        return SETUP_FAILED
    port = proxy.getsockname()[1]
    child = os.fork()
    if child == 0:
        # twice: the server is then no child of the command (a command that waits for any
        # child must not wait for it); it ends with the sandbox's pid namespace
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        threads = [threading.Thread(target=serve, args=(s, path, t), daemon=True)
                   for s, t in served]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        os._exit(0)
    os.waitpid(child, 0)
    for s, _ in served:
        s.close()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = LOOPBACK_NAMES
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        sys.stderr.write(f"andon.sandbox: cannot run {cmd[0]}: {exc}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
