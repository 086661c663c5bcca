"""What one agent stage may see and write, and the bubblewrap command line that does it.

A :class:`Plan` is built by the attempt for each stage (``plan_for``) and applied by
``agents.process.run_process``. Mount order (bwrap applies its options in order, a later
mount covering an earlier one):

1. ``/`` read-only; a fresh ``/proc`` (the new pid namespace) and a minimal ``/dev``;
2. empty, private ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run`` (a tmpfs each: state
   left there dies with the stage), with ``/run/systemd/resolve`` bound back for DNS;
3. the hidden paths covered by an empty tmpfs: the user's checkout (its ``.git``, other
   branches, packets, ``.andon/``: the store, evidence, other attempts), andon's state
   folder and the worktree root (every other attempt's clone);
4. ``HOME`` covered by a tmpfs (``~/.bashrc`` and the rest are private to the stage), with
   the agent CLI's own state folders bound back writable (it writes its session there and
   andon reads its usage from it) — ``Plan.home_state``;
5. read-only binds: ``[agent] sandbox_paths`` ``ro:``, the project's venv when it lives in
   the checkout, the folder of the prompt file, the folders on the agent's ``PATH`` (never
   one holding a hidden path) and the agent CLI's own package (``node_modules``);
6. the worktree writable (with ``Plan.writable`` beside it), then, read-only on top of it,
   its ``.git`` and the planted test files during ``implement`` (``Plan.locked``): the OS
   refuses to change or remove them.

The agent runs as uid/gid 65534 in a new user namespace with every capability dropped, in
its own pid, IPC and UTS namespaces (and network namespace at ``fs+net``: loopback only).
With ``Plan.allow_hosts`` set at ``fs+net`` (``[agent] network = "allow"``) its way out is
andon's filtering proxy: ``run_process`` starts ``netproxy.NetProxy`` and sets
``Plan.proxy_folder``; ``wrap`` binds that folder at ``/run/andon-net`` and starts the
command behind ``netbridge.py`` (the loopback ports that lead to it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import netbridge
from .installs import behind_path, installation_of
from .netproxy import SOCKET_NAME, loopback_mirrors
from .probe import base_args, capabilities

PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run")
KEEP_IN_RUN = ("/run/systemd/resolve",)
PROXY_MOUNT = "/run/andon-net"  # where the proxy's socket folder is inside the sandbox
NETBRIDGE = Path(netbridge.__file__).resolve()


@dataclass(frozen=True)
class Plan:
    """One stage's sandbox. ``level``: ``"none"`` (only the caps apply), ``"fs"`` or
    ``"fs+net"``; paths are absolute. ``hidden``: covered by an empty tmpfs; ``readonly`` /
    ``writable``: bound at the same path; ``locked``: read-only binds inside the worktree,
    applied last; ``home_state``: names under ``$HOME`` bound back writable when they
    exist; ``memory_mb`` / ``max_processes``: the caps (None: none); ``allow_hosts``: at
    ``fs+net``, the hosts andon's proxy lets through (``netproxy`` entries; None: no proxy,
    loopback only); ``proxy_folder``: the running proxy's socket folder (``run_process``)."""

    level: str
    worktree: Path
    hidden: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    locked: tuple[Path, ...] = ()
    home_state: tuple[str, ...] = ()
    memory_mb: int | None = None
    max_processes: int | None = None
    notes: tuple[str, ...] = field(default=())
    allow_hosts: tuple[str, ...] | None = None
    proxy_folder: Path | None = None

    @property
    def proxied(self) -> bool:
        """True when the stage's network is andon's proxy (``fs+net`` with a host list)."""
        return self.level == "fs+net" and self.allow_hosts is not None

    def with_hosts(self, *hosts: str) -> Plan:
        """The same plan, also letting ``hosts`` through the proxy (no change when the plan
        has no proxy: the network is either the host's or cut)."""
        if self.allow_hosts is None:
            return self
        return replace(self, allow_hosts=tuple(dict.fromkeys((*self.allow_hosts, *hosts))))

    def with_proxy(self, folder: Path) -> Plan:
        """The same plan, with the proxy serving its socket in ``folder``."""
        return replace(self, proxy_folder=folder)

    def with_home_state(self, names: Iterable[str]) -> Plan:
        """The same plan, also keeping ``names`` (relative to ``$HOME``) writable."""
        return replace(self, home_state=(*self.home_state, *names))

    def _path_dirs(self, env: Mapping[str, str]) -> list[Path]:
        """The folders on the agent's ``PATH``, read-only (the agent CLI and the tools it
        runs may live under ``/tmp`` or ``HOME``), with what their tools run from when they
        lie there (``installs.behind_path``: pyenv's root for its shims, pipx's venvs);
        never one holding a hidden path (``wrap`` skips those)."""
        hidden = [str(h) for h in self.hidden]
        home = env.get("HOME", "")
        private = [os.path.realpath(p) for p in (*PRIVATE_TMP, home) if os.path.isabs(p)
                   and os.path.realpath(p) != "/"]
        out: list[Path] = []
        for d in env.get("PATH", "").split(os.pathsep):
            real = os.path.realpath(d) if os.path.isabs(d) else ""
            if real and real != "/" and not any(h == real or h.startswith(real + os.sep)
                                                for h in hidden):
                out.append(Path(real))
                if any(real.startswith(p + os.sep) for p in private):
                    out += behind_path(Path(real))  # its tools' installations, also private
        return out

    def _uncovers(self, path: str) -> bool:
        """True when binding ``path`` would show a hidden path again (``/``, or a folder
        holding one): such a read-only bind is skipped."""
        return path == "/" or any(str(h) == path or str(h).startswith(path.rstrip("/") + os.sep)
                                  for h in self.hidden)

    def with_readonly(self, *paths: Path) -> Plan:
        """The same plan, also binding ``paths`` read-only."""
        return replace(self, readonly=(*self.readonly, *paths))

    def with_writable(self, *paths: Path) -> Plan:
        """The same plan, also binding ``paths`` writable (after the worktree)."""
        return replace(self, writable=(*self.writable, *paths))

    def describe(self) -> str:
        """One line for the stage's evidence: the level achieved and how."""
        caps = [f"{k} {v}" for k, v in (("memory_mb", self.memory_mb),
                                          ("max_processes", self.max_processes)) if v]
        if self.level == "none":
            return "sandbox none: the agent runs as andon's user" + (
                f" ({', '.join(caps)})" if caps else "")
        net = "network on" if self.level != "fs+net" else "loopback only"
        if self.proxied:
            allow = self.allow_hosts or ()
            hosts = ", ".join(allow[:6]) or "no host"
            more = f" and {len(allow) - 6} more" if len(allow) > 6 else ""
            net = f"network only through andon's proxy to {hosts}{more}"
        return (f"sandbox {self.level}: bubblewrap, uid 65534, no capabilities, {net}"
                + (f", {', '.join(caps)}" if caps else "") + self._locked_note())

    def _locked_note(self) -> str:
        # the record of containment: a write the OS refused to a planted test leaves no
        # tamper finding (nothing changed), so the evidence names what was locked
        names = sorted(str(p.relative_to(self.worktree)) if p.is_relative_to(self.worktree)
                       else str(p) for p in self.locked)
        if not names:
            return ""
        shown = ", ".join("the whole tree" if n == "." else n for n in names[:6])
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        return f"; read-only (the OS refuses writes): {shown}{more}"

    def wrap(self, argv: list[str], cwd: Path, env: Mapping[str, str]
             ) -> tuple[list[str], dict[str, str]]:
        """``(bwrap argv, environment)`` running ``argv`` in ``cwd`` inside this sandbox.
        ``TMPDIR`` becomes ``/tmp`` (the private one); ``argv[0]``'s folder and the
        ``PATH`` folders are named by their real paths (where they are bound); everything
        else is kept. At
        ``"none"``: both unchanged."""
        if self.level == "none":
            return list(argv), dict(env)
        bwrap = capabilities().bwrap or "bwrap"
        a = [*base_args(bwrap)]
        if self.level == "fs+net":
            a.append("--unshare-net")
        a += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        for t in PRIVATE_TMP:
            a += ["--tmpfs", t]
        for keep in KEEP_IN_RUN:
            if os.path.isdir(keep):
                a += ["--ro-bind", keep, keep]
        for h in _existing(self.hidden):
            a += ["--tmpfs", h]
        home = env.get("HOME")
        if home and os.path.isabs(home) and os.path.realpath(home) != "/":
            a += ["--tmpfs", home]
            for name in self.home_state:
                p = os.path.join(home, name)
                if os.path.exists(p):
                    a += ["--bind", p, p]
        for p in _existing((*self.readonly, *self._path_dirs(env))):
            if not self._uncovers(p):
                a += ["--ro-bind", p, p]
        for p in _existing((self.worktree, *self.writable)):
            a += ["--bind", p, p]
        for p in _existing(self.locked):
            a += ["--ro-bind", p, p]
        command = [*_real_folder(argv[:1]), *argv[1:]]
        if self.proxied and self.proxy_folder is not None:
            python = os.path.realpath(sys.executable)
            for p in _existing((*installation_of(python), NETBRIDGE)):
                if not self._uncovers(p):
                    a += ["--ro-bind", p, p]
            a += ["--bind", str(self.proxy_folder), PROXY_MOUNT]
            mirrors = [w for m in loopback_mirrors(self.allow_hosts or ())
                       for w in ("--mirror", m)]
            command = [python, "-I", "-S", str(NETBRIDGE), "--socket",
                       f"{PROXY_MOUNT}/{SOCKET_NAME}", *mirrors, "--", *command]
        a += ["--chdir", str(cwd), "--", *command]
        out = {**env, "TMPDIR": "/tmp"}
        if "PATH" in env:
            out["PATH"] = os.pathsep.join(os.path.realpath(d) if os.path.isabs(d) else d
                                          for d in env["PATH"].split(os.pathsep))
        return a, out


def _real_folder(names: list[str]) -> list[str]:
    # installations are bound at their real paths: a CLI named through a linked folder (a
    # `.tools` link in a clone below the private /tmp) is run by its folder's real path;
    # the last part stays as named (a venv's bin/python is a link whose
    # target would lose the venv)
    return [os.path.join(os.path.realpath(os.path.dirname(n)), os.path.basename(n))
            if os.path.isabs(n) and os.sep in n.rstrip(os.sep) else n for n in names]


def _existing(paths: Iterable[Path]) -> list[str]:
    # bwrap refuses a bind whose source is missing; a missing path has nothing to protect
    return [str(p) for p in paths if os.path.lexists(p)]
