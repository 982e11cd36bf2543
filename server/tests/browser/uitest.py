"""The base of the browser tests: one shared Chromium and one shared server
(started on first use, stopped by run.py), and a test case that opens a fresh
browser context per test and checks, after it, that the page logged no
console error and contacted nothing but the server under test.
"""

from __future__ import annotations

import re
import unittest

from playwright.sync_api import Page, expect, sync_playwright

from harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, TIMEOUT_S, Model, PageWatch, Server

expect.set_options(timeout=TIMEOUT_MS)

# ANSI colours a model prints at start (its log shows them coloured).
ANSI_BANNER = 'printf "\\033[1;31mred alert\\033[0m then \\033[32mgreen light\\033[0m plain\\n" >&2'

MODELS = [
    # Held: its mockswap starts with the gate closed, so a request to it stays
    # in flight until the test opens the gate.
    Model("alpha", "Alpha (held)", "Requests wait at its gate", ["--gate-closed"]),
    Model(
        "beta",
        "Beta",
        "Swaps with alpha",
        ["--load-time", "200ms"],
        aliases=["b"],
        yaml=["metadata: {family: llama, quant: Q4_K_M}"],
    ),
    # Streams slowly, so a partly streamed answer can be seen; prints ANSI colours.
    Model(
        "gamma",
        "Gamma",
        "Streams 8 tokens per second",
        ["--tokens-per-second", "8"],
        yaml=["capabilities: {in: [text, image], out: [text], tools: true, context: 32768}"],
        shell_before=ANSI_BANNER,
    ),
    # Every kind of request the playground sends (mockswap answers them all).
    Model(
        "studio",
        "Studio",
        "Images, speech, transcription and rerank",
        [],
        yaml=["capabilities: {in: [text, audio, image], out: [text, audio, image], reranker: true}"],
    ),
]

# A selector over two of them, and a profile that pins it.
NAMES_YAML = """\
selectors:
  any-chat: { strategy: warm, targets: [gamma, beta], name: "Any chat" }
profiles:
  night: { description: Night shift, pins: { any-chat: beta } }
"""


# Endpoints of the history issue (26) that have not landed yet: the page
# asks for them and copes with their 404 (Chromium logs each as a console
# error). Each leaves this list when it lands.
PENDING_ENDPOINTS: tuple[str, ...] = ()


class Shared:
    """What every test module shares; run.py calls close() at the end."""

    playwright = None
    browser = None
    server: Server | None = None

    @classmethod
    def get_browser(cls):
        if cls.browser is None:
            cls.playwright = sync_playwright().start()
            cls.browser = cls.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        return cls.browser

    @classmethod
    def get_server(cls) -> Server:
        if cls.server is None:
            cls.server = Server(MODELS, extra_yaml=NAMES_YAML).start()
        return cls.server

    @classmethod
    def close(cls):
        if cls.server is not None:
            cls.server.stop()
            cls.server = None
        if cls.browser is not None:
            cls.browser.close()
            cls.playwright.stop()
            cls.browser = None


class UiTest(unittest.TestCase):
    """A fresh context and page per test, checked for errors and outside requests."""

    viewport = {"width": 1280, "height": 860}
    color_scheme = "light"
    # Console errors a test provokes on purpose (Chromium logs a failed call itself).
    allowed_errors: tuple[str, ...] = ()

    @property
    def server(self) -> Server:
        return Shared.get_server()

    def setUp(self):
        self.context = Shared.get_browser().new_context(
            viewport=self.viewport, color_scheme=self.color_scheme, accept_downloads=True
        )
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=self.server.url)
        self.watch = PageWatch(self.context, self.server.url)
        self.page: Page = self.context.new_page()

    def tearDown(self):
        self.context.close()
        errors = [
            e
            for e in self.watch.errors
            if not any(a in e for a in self.allowed_errors)
            and not (e.startswith("console error: Failed to load resource: the server responded with a status of 404")
                     and any(p in e for p in PENDING_ENDPOINTS))
        ]
        self.assertEqual(errors, [], "the page logged errors")
        self.assertEqual(self.watch.outside, [], "the page contacted another host")
        self.assertTrue(
            all(url.startswith(self.server.url) for url in self.watch.requests), self.watch.requests
        )
        self.assertTrue(self.watch.requests, "no request was recorded at all")

    def open(self, view: str = "models") -> Page:
        self.page.goto(f"{self.server.url}/ui/{view}")
        expect(self.page.locator("#connection")).to_have_text("Live")
        return self.page

    def card(self, model: str):
        return self.page.locator(f'article.model[data-model="{model}"]')

    def unload_all(self):
        self.server.json("POST", "/api/models/unload")

    def release(self, model: str, held: int = 1):
        """Waits until `held` requests wait at a gated model's gate, then opens it."""
        self.server.mock(model, "GET", f"/__mockswap/gate?wait_held={held}&timeout_ms={int(TIMEOUT_MS)}")
        self.server.mock(model, "POST", "/__mockswap/gate", {"open": True})

    def close_gate(self, model: str):
        self.server.mock(model, "POST", "/__mockswap/gate", {"open": False})


def has_class(name: str):
    return re.compile(rf"\b{re.escape(name)}\b")


__all__ = ["Model", "Server", "Shared", "TIMEOUT_MS", "TIMEOUT_S", "UiTest", "expect", "has_class"]
