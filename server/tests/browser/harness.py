"""The pieces the browser tests share: a llama-swap-server with mockswap
upstreams on loopback, and a headless Chromium that records every request the
page makes and every console error.

Nothing here sleeps to synchronise: the server's first stdout line says where
it listens, mockswap's admin API long-polls for held requests, and the page is
waited on with Playwright's auto-waiting expectations (bounded by TIMEOUT_MS).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Generous upper bounds: the machine running CI may be loaded.
TIMEOUT_MS = 30_000
TIMEOUT_S = TIMEOUT_MS / 1000

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Without the background-networking switches Chromium calls Google's hosts at
# start; they would show up as requests leaving the machine.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]


def binary(name: str, env: str) -> Path:
    """A workspace binary (built by scripts/test), or the one `env` names."""
    if os.environ.get(env):
        return Path(os.environ[env])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Model:
    """One fake model: a mockswap process the server starts on demand."""

    id: str
    name: str
    description: str
    flags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    # More YAML lines under the model (`parallel: 1`, ...).
    yaml: list[str] = field(default_factory=list)
    # A shell snippet run before mockswap starts (its output goes to the model's log).
    shell_before: str = ""

    def cmd(self) -> str:
        mock = " ".join([str(binary("mockswap", "MOCKSWAP_BIN")), "--listen", f"127.0.0.1:{self.port}", *self.flags])
        if not self.shell_before:
            return mock
        # POSIX quoting as the server splits it: the snippet, then mockswap in its place.
        script = f"{self.shell_before}; exec {mock}".replace("'", "'\\''")
        return f"sh -c '{script}'"


class Server:
    """llama-swap-server on 127.0.0.1 with the given models; stop() reaps it."""

    def __init__(self, models: list[Model], api_keys: list[str] | None = None, extra_yaml: str = ""):
        self.models = {m.id: m for m in models}
        self.api_keys = api_keys or []
        self.extra_yaml = extra_yaml
        self.dir = tempfile.TemporaryDirectory(prefix="llama-swap-ui-")
        self.config = Path(self.dir.name) / "config.yaml"
        self.config.write_text(self._config_text())
        self.log_path = Path(self.dir.name) / "server.log"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def _config_text(self) -> str:
        lines = ["healthCheckTimeout: 30", "sendLoadingState: true"]
        if self.api_keys:
            lines.append("apiKeys:")
            lines += [f"  - {json.dumps(k)}" for k in self.api_keys]
        lines.append("models:")
        for m in self.models.values():
            cmd = m.cmd()
            lines += [
                f"  {m.id}:",
                f"    name: {json.dumps(m.name)}",
                f"    description: {json.dumps(m.description)}",
                f"    cmd: {json.dumps(cmd)}",
                f"    proxy: http://127.0.0.1:{m.port}",
            ]
            if m.aliases:
                lines.append(f"    aliases: {json.dumps(m.aliases)}")
            lines += [f"    {line}" for line in m.yaml]
        return "\n".join(lines) + "\n" + self.extra_yaml

    def start(self) -> "Server":
        exe = binary("llama-swap-server", "LLAMA_SWAP_SERVER_BIN")
        if not exe.exists():
            raise RuntimeError(f"{exe} is missing: run `cargo build --workspace --bins` first")
        # The child keeps its own copy of the descriptor.
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [str(exe), "--config", str(self.config), "--listen", "127.0.0.1:0"],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
            )
        assert self.process.stdout is not None
        first = self.process.stdout.readline().strip()
        if not first.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"server did not start: {first!r}\n{self.log_path.read_text()}")
        self.url = first.removeprefix("listening on ").rstrip("/")
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.dir.cleanup()

    # HTTP helpers (urllib: no dependency beyond the standard library).

    def request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        headers: dict[str, str] | None = None,
        base: str | None = None,
        timeout: float = TIMEOUT_S,
    ) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            (base or self.url) + path, data=data, method=method, headers=dict(headers or {})
        )
        if data is not None:
            req.add_header("Content-Type", "application/json")
        # The first key, unless the caller sends another.
        if self.api_keys and not req.has_header("Authorization"):
            req.add_header("Authorization", f"Bearer {self.api_keys[0]}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def json(self, method: str, path: str, **kwargs) -> dict:
        status, body = self.request(method, path, **kwargs)
        if status >= 400:
            raise AssertionError(f"{method} {path} answered {status}: {body!r}")
        return json.loads(body)

    def chat(self, model: str, text: str, priority: str | None = None) -> tuple[int, bytes]:
        headers = {"X-Priority": priority} if priority is not None else {}
        return self.request(
            "POST",
            "/v1/chat/completions",
            body={"model": model, "messages": [{"role": "user", "content": text}]},
            headers=headers,
        )

    def in_background(self, fn, *args) -> "Background":
        return Background(fn, *args)

    def mock(self, model: str, method: str, path: str, body: dict | None = None) -> dict:
        """Calls the admin API of a model's mockswap (directly, not through the proxy)."""
        port = self.models[model].port
        status, raw = self.request(method, path, body=body, base=f"http://127.0.0.1:{port}")
        if status >= 400:
            raise AssertionError(f"mockswap {model} {path} answered {status}: {raw!r}")
        return json.loads(raw)


class Background:
    """A call running on its own thread; result() joins it."""

    def __init__(self, fn, *args):
        self._result = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn, *args):
        try:
            self._result = fn(*args)
        except BaseException as error:  # reported by result()
            self._error = error

    def result(self, timeout: float = TIMEOUT_S):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("background call did not finish")
        if self._error:
            raise self._error
        return self._result


class PageWatch:
    """Records, for one browser context, every request and every console error;
    any request to another host than the server's is aborted and recorded."""

    def __init__(self, context, server_url: str):
        self.origin = server_url
        self.requests: list[str] = []
        self.outside: list[str] = []
        self.errors: list[str] = []
        context.route("**/*", self._route)
        context.on("request", lambda request: self.requests.append(request.url))
        context.on("page", self._watch_page)
        for page in context.pages:
            self._watch_page(page)

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.origin + "/") or url == self.origin:
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def _watch_page(self, page):
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))

    def _console(self, message):
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            self.errors.append(f"console error: {message.text}" + (f" ({where})" if where else ""))
