"""The web UI in a real (headless) Chromium against a real server whose
models are mockswap processes.

Every test runs in a fresh browser context whose requests are all recorded:
none may leave 127.0.0.1, and no page may log a console error.
"""

from __future__ import annotations

import re
import unittest

from playwright.sync_api import Page, expect, sync_playwright

from harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, Model, PageWatch, Server

expect.set_options(timeout=TIMEOUT_MS)

MODELS = [
    # Held: its mockswap starts with the gate closed, so a request to it stays
    # in flight until the test opens the gate.
    Model("alpha", "Alpha (held)", "Requests wait at its gate", ["--gate-closed"]),
    Model("beta", "Beta", "Swaps with alpha", ["--load-time", "200ms"], aliases=["b"]),
    # Streams slowly, so a partly streamed answer can be seen.
    Model("gamma", "Gamma", "Streams 8 tokens per second", ["--tokens-per-second", "8"]),
]


# A selector over two of them, and a profile that pins it.
NAMES_YAML = """\
selectors:
  any-chat: { strategy: warm, targets: [gamma, beta], name: "Any chat" }
profiles:
  night: { description: Night shift, pins: { any-chat: beta } }
"""


def setUpModule():
    global playwright, browser, server
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    server = Server(MODELS, extra_yaml=NAMES_YAML).start()


def tearDownModule():
    server.stop()
    browser.close()
    playwright.stop()


class UiTest(unittest.TestCase):
    """A fresh context and page per test, checked for errors and outside requests."""

    viewport = {"width": 1280, "height": 860}
    color_scheme = "light"
    allowed_errors: tuple[str, ...] = ()

    def setUp(self):
        self.context = browser.new_context(viewport=self.viewport, color_scheme=self.color_scheme)
        self.watch = PageWatch(self.context, self.server.url)
        self.page: Page = self.context.new_page()

    @property
    def server(self) -> Server:
        return server

    def tearDown(self):
        self.context.close()
        errors = [e for e in self.watch.errors if not any(a in e for a in self.allowed_errors)]
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


class Models(UiTest):
    def test_every_configured_model_appears_with_its_name_state_and_buttons(self):
        self.unload_all()
        page = self.open("models")
        for model in MODELS:
            card = self.card(model.id)
            expect(card).to_contain_text(model.name)
            expect(card).to_contain_text(model.description)
            expect(card.locator(".badge")).to_have_text("stopped")
            expect(card.get_by_role("button", name=f"Load {model.id}", exact=True)).to_have_text("Load")
            expect(card.get_by_role("button", name=f"Unload {model.id}")).to_have_text("Unload")
        expect(self.card("beta")).to_contain_text("aliases: b")
        expect(page.get_by_role("button", name="Unload all")).to_be_visible()

    def test_a_load_through_the_api_shows_up_live_without_a_reload(self):
        self.unload_all()
        self.open("models")
        expect(self.card("beta").locator(".badge")).to_have_text("stopped")
        self.page.evaluate("window.__marker = 'same page'")
        self.server.json("POST", "/api/models/load/beta")
        expect(self.card("beta").locator(".badge")).to_have_text("ready")
        self.assertEqual(self.page.evaluate("window.__marker"), "same page")
        self.assertEqual(self.server.request("POST", "/api/models/unload/beta")[0], 200)
        expect(self.card("beta").locator(".badge")).to_have_text("stopped")

    def test_load_and_unload_buttons_start_and_stop_the_model(self):
        self.unload_all()
        self.open("models")
        card = self.card("gamma")
        card.get_by_role("button", name="Load gamma", exact=True).click()
        expect(card.locator(".badge")).to_have_text("ready")
        running = self.server.json("GET", "/running")["running"]
        self.assertEqual([m["model"] for m in running], ["gamma"])
        expect(card.get_by_role("button", name="Load gamma", exact=True)).to_be_disabled()
        card.get_by_role("button", name="Unload gamma").click()
        expect(card.locator(".badge")).to_have_text("stopped")
        self.assertEqual(self.server.json("GET", "/running")["running"], [])

    def test_a_selector_shows_its_targets_and_no_load_buttons(self):
        self.unload_all()
        self.open("models")
        card = self.card("any-chat")
        expect(card).to_contain_text("Any chat")
        expect(card).to_contain_text("selector (warm) → gamma, beta")
        expect(card.locator(".badge")).to_have_text("stopped")
        expect(card.get_by_role("button")).to_have_count(0)
        self.server.json("POST", "/api/models/load/gamma")
        expect(card.locator(".badge")).to_have_text("ready")
        expect(self.page.locator(".toolbar h1")).to_contain_text("1 of 3 running")

    def test_the_profile_can_be_switched_from_the_page(self):
        page = self.open("models")
        select = page.get_by_label("Profile")
        note = page.locator("#profile-note")
        expect(select).to_have_value("")
        select.select_option("night")
        # Shown once the server's profileChanged event confirms the switch.
        expect(note).to_have_text("Night shift")
        self.assertEqual(self.server.json("GET", "/api/profiles")["active"], "night")
        select.select_option("")
        expect(note).to_have_text("")
        self.assertEqual(self.server.json("GET", "/api/profiles")["active"], None)

    def test_unload_all_stops_every_model(self):
        self.server.json("POST", "/api/models/load/gamma")
        self.open("models")
        expect(self.card("gamma").locator(".badge")).to_have_text("ready")
        self.page.get_by_role("button", name="Unload all").click()
        expect(self.card("gamma").locator(".badge")).to_have_text("stopped")
        self.assertEqual(self.server.json("GET", "/running")["running"], [])



class SlotsFull(UiTest):
    """A model with `parallel: 1` on a server of its own: a second request
    waits in the queue for the busy model's slot, not for a swap."""

    @classmethod
    def setUpClass(cls):
        cls.own = Server(
            [Model("delta", "Delta (one slot)", "One request at a time", ["--gate-closed"], yaml=["parallel: 1"])]
        ).start()

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()

    @property
    def server(self) -> Server:
        return self.own

    def test_a_request_for_a_busy_model_waits_for_its_slot(self):
        page = self.open("queue")
        held = self.server.in_background(self.server.chat, "delta", "held", None)
        expect(page.locator('#running article[data-model="delta"] li')).to_have_count(1)
        self.server.mock("delta", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        waiting = self.server.in_background(self.server.chat, "delta", "second", "10")
        rows = page.locator("tr.queue-row")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("delta")
        expect(rows.first.locator("td.reason")).to_have_text("slots full")
        self.server.mock("delta", "POST", "/__mockswap/gate", {"open": True})
        for call in (held, waiting):
            status, _ = call.result()
            self.assertEqual(status, 200)
        expect(rows).to_have_count(0)

class QueueAndActivity(UiTest):
    def test_a_held_request_then_low_and_elevated_ones_wait_in_the_queue_and_activity_lists_them(self):
        self.unload_all()
        page = self.open("queue")
        held = self.server.in_background(self.server.chat, "alpha", "held", None)
        running = page.locator('#running article[data-model="alpha"] li')
        expect(running).to_have_count(1)
        # The request reached alpha's upstream and is held at its gate.
        self.server.mock("alpha", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        low = self.server.in_background(self.server.chat, "beta", "low", "-10")
        rows = page.locator("tr.queue-row")
        expect(rows).to_have_count(1)
        elevated = self.server.in_background(self.server.chat, "b", "elevated", "10")
        expect(rows).to_have_count(2)
        # Ranked by priority: the Elevated one first although it came last.
        first, second = rows.nth(0), rows.nth(1)
        expect(first).to_contain_text("#1")
        expect(first).to_contain_text("beta")
        expect(first.locator(".badge").first).to_have_text("+10 elevated")
        expect(first.locator(".badge").first).to_have_class(re.compile(r"\bband-high\b"))
        expect(first).to_contain_text("+10 (Elevated)")
        expect(second).to_contain_text("#2")
        expect(second.locator(".badge").first).to_have_text("-10 low")
        expect(second.locator(".badge").first).to_have_class(re.compile(r"\bband-low\b"))
        expect(second).to_contain_text("-10 (Low)")
        expect(page.locator("#waiting-title")).to_contain_text("(2)")
        # Both need alpha stopped before beta can start.
        expect(first.locator("td.reason")).to_have_text("swap")
        expect(second.locator("td.reason")).to_have_text("swap")
        self.server.mock("alpha", "POST", "/__mockswap/gate", {"open": True})
        for call in (held, low, elevated):
            status, _ = call.result()
            self.assertEqual(status, 200)
        expect(rows).to_have_count(0)

        page.get_by_role("link", name="Activity").click()
        expect(page).to_have_url(f"{self.server.url}/ui/activity")
        lines = page.locator("tr.activity-row")
        expect(lines.nth(2)).to_be_visible()
        # The two beta requests may finish in either order; both are among the newest three.
        newest = page.locator("tr.activity-row:nth-child(-n+3)")
        for model, priority in [("alpha", "0 normal"), ("beta", "+10 elevated"), ("beta", "-10 low")]:
            row = newest.filter(has=page.locator(f'td:has-text("{priority}")')).filter(has_text=model)
            expect(row).to_have_count(1)
            expect(row.locator("td").nth(3)).to_have_text("200")
            # Tokens as the upstream reported them.
            expect(row.locator("td").nth(6)).to_have_text(re.compile(r"^\d+ → \d+$"))
        page.select_option("#activity-model", "alpha")
        expected = len(self.server.json("GET", "/api/activity?model=alpha&limit=200")["activity"])
        expect(page.locator("tr.activity-row")).to_have_count(expected)


class Logs(UiTest):
    def test_log_lines_name_the_models_and_can_be_filtered(self):
        self.unload_all()
        self.server.json("POST", "/api/models/load/gamma")
        self.server.json("POST", "/api/models/load/beta")
        page = self.open("logs")
        gamma = page.locator('#log-lines .log-line[data-source="upstream"][data-model="gamma"]')
        beta = page.locator('#log-lines .log-line[data-model="beta"]')
        expect(gamma.first).to_contain_text("[gamma]")
        expect(beta.and_(page.locator('[data-source="upstream"]')).first).to_contain_text("[beta]")
        # The proxy's own log is there too, its lines about a model tagged with it.
        proxy = page.locator('#log-lines .log-line[data-source="proxy"]')
        proxy_gamma = page.locator('#log-lines .log-line[data-source="proxy"][data-model="gamma"]')
        expect(proxy_gamma.first).to_contain_text("[proxy gamma]")
        page.select_option("#log-source", "gamma")
        expect(beta).to_have_count(0)
        expect(gamma.first).to_be_visible()
        expect(proxy_gamma.first).to_be_visible()
        page.select_option("#log-source", "proxy")
        expect(page.locator('#log-lines .log-line[data-source="upstream"]')).to_have_count(0)
        expect(proxy.first).to_be_visible()


class Playground(UiTest):
    def test_an_answer_streams_in_after_the_loading_frames(self):
        self.unload_all()
        page = self.open("playground")
        page.select_option("#pg-model", "gamma")
        page.select_option("#pg-priority", "Elevated")
        page.fill("#pg-prompt", "hello there friend")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".message.assistant").last
        expect(answer).to_contain_text("gamma · Elevated")
        content = answer.locator(".content")
        # Part of the answer is on screen while the rest still streams.
        page.wait_for_function(
            """() => {
                const a = [...document.querySelectorAll('.message.assistant')].pop();
                const text = a?.querySelector('.content')?.textContent || '';
                return a?.dataset.done === 'false' && text.length > 0 && text !== '[gamma] hello there friend';
            }""",
            timeout=TIMEOUT_MS,
        )
        expect(answer).to_have_attribute("data-done", "true")
        # The proxy's loading text is progress, not the model's answer.
        expect(content).to_have_text("[gamma] hello there friend")
        expect(answer.locator(".progress")).to_contain_text("done in")
        expect(answer.locator(".error")).to_have_count(0)

    def test_ctrl_enter_sends_a_message_to_an_alias(self):
        page = self.open("playground")
        page.select_option("#pg-model", "b")
        page.fill("#pg-prompt", "via the alias")
        page.press("#pg-prompt", "Control+Enter")
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        expect(answer.locator(".content")).to_have_text(re.compile(r"^\[b(eta)?\] via the alias$"))
        expect(page.locator(".message.user").last).to_have_text(re.compile("via the alias"))


class PlaygroundErrors(UiTest):
    # Chromium logs the failed call itself as a console error.
    allowed_errors = ("status of 500",)

    def test_an_upstream_error_is_shown_with_its_message(self):
        self.server.json("POST", "/api/models/load/gamma")
        self.server.mock(
            "gamma",
            "POST",
            "/__mockswap/faults",
            {"fault": {"type": "status", "status": 500, "body": {"error": {"message": "out of memory"}}}},
        )
        page = self.open("playground")
        page.select_option("#pg-model", "gamma")
        page.fill("#pg-prompt", "this fails")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        expect(answer.get_by_role("alert")).to_contain_text("out of memory")


class Navigation(UiTest):
    def test_deep_links_open_their_view_and_the_nav_marks_it(self):
        for view, heading in [
            ("models", "Models"),
            ("queue", "Queue"),
            ("activity", "Activity"),
            ("logs", "Logs"),
            ("playground", "Playground"),
        ]:
            self.page.goto(f"{self.server.url}/ui/{view}")
            expect(self.page.locator("main h1").first).to_contain_text(heading)
            expect(self.page.get_by_role("link", name=heading)).to_have_attribute("aria-current", "page")
        self.page.goto(f"{self.server.url}/ui")
        expect(self.page.locator("main h1").first).to_contain_text("Models")

    def test_the_keyboard_reaches_the_views_and_the_buttons(self):
        self.unload_all()
        page = self.open("models")
        page.get_by_role("link", name="Queue").focus()
        page.keyboard.press("Enter")
        expect(page.locator("main h1").first).to_contain_text("Queue")
        page.get_by_role("link", name="Models").focus()
        page.keyboard.press("Enter")
        load = self.card("gamma").get_by_role("button", name="Load gamma", exact=True)
        load.focus()
        page.keyboard.press("Enter")
        expect(self.card("gamma").locator(".badge")).to_have_text("ready")
        # The rows are updated in place: focus stays in the card it was in.
        self.assertEqual(page.evaluate("document.activeElement.closest('article')?.dataset.model"), "gamma")
        unload = self.card("gamma").get_by_role("button", name="Unload gamma")
        unload.focus()
        page.keyboard.press("Space")
        expect(self.card("gamma").locator(".badge")).to_have_text("stopped")


class Phone(UiTest):
    viewport = {"width": 390, "height": 844}

    def test_every_view_fits_a_phone_width_screen(self):
        # Something in every view: a finished request, one held in flight, one waiting.
        self.unload_all()
        self.assertEqual(self.server.chat("gamma", "hello")[0], 200)
        held = self.server.in_background(self.server.chat, "alpha", "held", None)
        self.open("queue")
        expect(self.page.locator('#running article[data-model="alpha"] li')).to_have_count(1)
        waiting = self.server.in_background(self.server.chat, "beta", "waiting", "-10")
        expect(self.page.locator("tr.queue-row")).to_have_count(1)
        for view in ("models", "queue", "activity", "logs", "playground"):
            self.page.goto(f"{self.server.url}/ui/{view}")
            expect(self.page.locator("#connection")).to_have_text("Live")
            expect(self.page.get_by_role("link", name="Playground")).to_be_visible()
            if view == "queue":
                expect(self.page.locator("tr.queue-row")).to_have_count(1)
                expect(self.page.locator("#running li")).to_have_count(1)
            if view == "activity":
                expect(self.page.locator("tr.activity-row").first).to_be_visible()
            overflow = self.page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            self.assertLessEqual(overflow, 0, f"{view} scrolls sideways on a phone")
            # Nothing sticks out of the screen, but inside the containers that scroll.
            sticking_out = self.page.evaluate(
                """() => [...document.querySelectorAll('body *')]
                    .filter((el) => !el.closest('.table-wrap, nav, .logs, dialog'))
                    .filter((el) => el.getBoundingClientRect().right > innerWidth + 1)
                    .map((el) => el.tagName + '.' + el.className)"""
            )
            self.assertEqual(sticking_out, [], f"{view} on a phone")
        self.server.mock("alpha", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        self.server.mock("alpha", "POST", "/__mockswap/gate", {"open": True})
        self.assertEqual(held.result()[0], 200)
        self.assertEqual(waiting.result()[0], 200)


def contrast(page: Page) -> float:
    """Contrast ratio of the body text against the page background."""
    return page.evaluate(
        """() => {
            const rgb = (c) => c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
            const lum = ([r, g, b]) => {
                const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
            };
            const s = getComputedStyle(document.body);
            const a = lum(rgb(s.color)), b = lum(rgb(s.backgroundColor));
            return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        }"""
    )


class Dark(UiTest):
    color_scheme = "dark"

    def test_dark_mode_has_a_dark_background_and_readable_text(self):
        page = self.open("models")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        self.assertEqual(background, "rgb(17, 19, 23)")
        self.assertGreaterEqual(contrast(page), 7.0)


class Light(UiTest):
    def test_light_mode_has_a_light_background_and_readable_text(self):
        page = self.open("models")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        self.assertEqual(background, "rgb(247, 247, 248)")
        self.assertGreaterEqual(contrast(page), 7.0)


class ApiKey(UiTest):
    """A second server with apiKeys: the page asks for the key once and sends it."""

    # Chromium logs the refused calls themselves as console errors.
    allowed_errors = ("401",)

    @classmethod
    def setUpClass(cls):
        cls.keyed = Server([Model("gamma", "Gamma", "keyed")], api_keys=["sk-right"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.keyed.stop()

    @property
    def server(self) -> Server:
        return self.keyed

    def test_the_page_asks_for_the_key_refuses_a_wrong_one_and_works_with_the_right_one(self):
        page = self.page
        page.goto(f"{self.keyed.url}/ui/models")
        dialog = page.get_by_role("dialog")
        expect(dialog).to_be_visible()
        expect(page.locator("#connection")).to_have_text("API key needed")
        expect(self.card("gamma")).to_have_count(0)
        page.fill("#key-input", "sk-wrong")
        page.get_by_role("button", name="Use key").click()
        expect(page.locator("#key-error")).to_have_text("The server did not accept that key.")
        page.fill("#key-input", "sk-right")
        page.get_by_role("button", name="Use key").click()
        expect(page.locator("#connection")).to_have_text("Live")
        expect(self.card("gamma")).to_contain_text("Gamma")
        # Kept: a reload does not ask again.
        page.reload()
        expect(page.locator("#connection")).to_have_text("Live")
        expect(dialog).to_be_hidden()
        # The page's own calls carry it.
        self.card("gamma").get_by_role("button", name="Load gamma", exact=True).click()
        expect(self.card("gamma").locator(".badge")).to_have_text("ready")


if __name__ == "__main__":
    unittest.main()
