"""What holds on every view: navigation and deep links, the keyboard, phone
width, themes and the page title, Settings, the API key."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from uitest import Model, Server, UiTest, expect

VIEWS = [
    ("models", "Models"),
    ("queue", "Queue"),
    ("activity", "Activity"),
    ("logs", "Logs"),
    ("playground", "Playground"),
    ("performance", "Performance"),
    ("settings", "Settings"),
]


class Navigation(UiTest):
    def test_deep_links_open_their_view_and_the_nav_marks_it(self):
        for view, heading in VIEWS:
            self.page.goto(f"{self.server.url}/ui/{view}")
            expect(self.page.locator("main h1").first).to_contain_text(heading)
            expect(self.page.get_by_role("link", name=heading, exact=True)).to_have_attribute("aria-current", "page")
            expect(self.page).to_have_title(re.compile(rf"^{heading}( · \w+)? · llama-swap-rs$"))
        self.page.goto(f"{self.server.url}/ui")
        expect(self.page.locator("main h1").first).to_contain_text("Models")
        # A model id with a dot is a model's page, not a missing file.
        self.page.goto(f"{self.server.url}/ui/playground/rerank")
        expect(self.page.get_by_role("tab", name="Rerank")).to_have_attribute("aria-selected", "true")

    def test_llama_swaps_hash_links_land_on_the_same_view(self):
        self.page.goto(f"{self.server.url}/ui/#/logs")
        expect(self.page.locator("main h1").first).to_have_text("Logs")
        expect(self.page).to_have_url(f"{self.server.url}/ui/logs")
        self.page.goto(f"{self.server.url}/ui/#/models/gamma")
        expect(self.page.locator("main h1").first).to_have_text("Gamma")

    def test_back_and_forward_move_between_views_without_reloading(self):
        page = self.open("models")
        page.evaluate("window.__marker = 'same page'")
        page.get_by_role("link", name="Queue").click()
        expect(page.locator("main h1").first).to_have_text("Queue")
        page.get_by_role("link", name="Playground").click()
        page.get_by_role("tab", name="Rerank").click()
        expect(page).to_have_url(f"{self.server.url}/ui/playground/rerank")
        page.go_back()
        expect(page.get_by_role("tab", name="Chat")).to_have_attribute("aria-selected", "true")
        page.go_back()
        expect(page.locator("main h1").first).to_have_text("Queue")
        page.go_forward()
        expect(page.locator("main h1").first).to_have_text("Playground")
        self.assertEqual(page.evaluate("window.__marker"), "same page")

    def test_the_playground_keeps_its_conversation_across_views(self):
        page = self.open("playground/chat")
        page.select_option("#pg-model", "beta")
        page.fill("#pg-prompt", "remember me")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant").last).to_have_attribute("data-done", "true")
        page.get_by_role("link", name="Queue").click()
        expect(page.locator("main h1").first).to_have_text("Queue")
        page.get_by_role("link", name="Playground").click()
        expect(page.locator(".message.user").last).to_contain_text("remember me")

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
        # Tabs move with the arrow keys.
        page.goto(f"{self.server.url}/ui/playground/chat")
        page.get_by_role("tab", name="Chat").focus()
        page.keyboard.press("ArrowRight")
        expect(page.get_by_role("tab", name="Images")).to_be_focused()
        expect(page.get_by_role("tab", name="Images")).to_have_attribute("aria-selected", "true")

    def test_every_control_is_a_named_button_link_or_field(self):
        views = (
            "models", "queue", "activity", "logs", "performance", "settings", "models/gamma",
            *(f"playground/{tab}" for tab in ("chat", "images", "speech", "transcription", "rerank", "load-test")),
        )
        for view in views:
            self.open(view)
            self.assert_controls_named(view)
        # Inside the Activity's filter drawer, column menu and dialogs too.
        self.assertEqual(self.server.chat("beta", "named controls")[0], 200)
        page = self.open("activity")
        expect(page.locator("tr.activity-row").first).to_be_visible()
        page.get_by_role("button", name="Filters").click()
        page.locator("section.history").get_by_role("button", name="Columns").click()
        self.assert_controls_named("activity with its drawer and column menu")
        page.keyboard.press("Escape")
        page.locator("tr.activity-row").first.get_by_role("button", name=re.compile("^View the capture")).click()
        expect(page.get_by_role("dialog").locator("pre").first).to_be_visible()
        self.assert_controls_named("the capture dialog")
        page.get_by_role("dialog").get_by_role("button", name="Close").click()
        page.get_by_role("button", name="Export").click()
        expect(page.get_by_role("dialog").locator("#export-markdown")).to_contain_text("| Summary | |")
        self.assert_controls_named("the export dialog")

    def assert_controls_named(self, where: str):
        nameless = self.page.evaluate(
            """() => [...document.querySelectorAll('button, a[href], input, select, textarea, summary, [role=tab]')]
                .filter((el) => el.getClientRects().length > 0)
                .filter((el) => {
                    const label = el.getAttribute('aria-label') || el.textContent.trim() || el.labels?.[0]?.textContent.trim()
                        || el.getAttribute('aria-labelledby') || el.getAttribute('title') || el.getAttribute('placeholder');
                    return !label;
                })
                .map((el) => el.outerHTML.slice(0, 120))"""
        )
        self.assertEqual(nameless, [], where)
        clickable = self.page.evaluate(
            "() => [...document.querySelectorAll('[onclick], div[tabindex], span[tabindex], td[tabindex], li[tabindex]')].map((el) => el.outerHTML.slice(0, 80))"
        )
        self.assertEqual(clickable, [], f"{where}: click targets that are not buttons")

    def test_the_activity_table_and_its_capture_work_by_keyboard(self):
        status, _ = self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": "beta", "messages": [{"role": "user", "content": "by keyboard"}]},
        )
        self.assertEqual(status, 200)
        page = self.open("activity")
        row = page.locator("tr.activity-row").first
        expect(row).to_have_attribute("data-model", "beta")
        # Sorting: a header is a button that Enter presses.
        page.get_by_role("button", name="ID", exact=True).focus()
        page.keyboard.press("Enter")
        expect(page.locator('th[data-column="id"]')).to_have_attribute("aria-sort", "ascending")
        page.get_by_role("button", name="ID", exact=True).focus()
        page.keyboard.press("Enter")
        expect(page.locator('th[data-column="id"]')).to_have_attribute("aria-sort", "descending")
        # The capture opens with Enter, Escape closes it, and the focus returns to its button.
        # This test's own row: another test's request may have finished since.
        view = page.locator('tr.activity-row[data-model="beta"]').first.get_by_role(
            "button", name=re.compile("^View the capture")
        )
        view.focus()
        page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog")
        expect(dialog.locator('pre[data-body="request"]')).to_contain_text("by keyboard")
        self.assertTrue(page.evaluate("document.activeElement.closest('dialog') !== null"), "the focus is in the dialog")
        page.keyboard.press("Escape")
        expect(page.get_by_role("dialog")).to_have_count(0)
        expect(view).to_be_focused()


class Phone(UiTest):
    viewport = {"width": 390, "height": 844}

    def test_every_view_fits_a_phone_width_screen(self):
        # Something in every view: a finished request, one held in flight, one waiting.
        self.unload_all()
        self.assertEqual(self.server.chat("gamma", "hello")[0], 200)
        held = self.server.in_background(self.server.chat, "alpha", "held", None)
        self.open("queue")
        expect(self.page.locator('#running tr.running-row[data-model="alpha"]')).to_have_count(1)
        waiting = self.server.in_background(self.server.chat, "beta", "waiting", "-10")
        expect(self.page.locator("tr.queue-row")).to_have_count(1)
        views = [v for v, _ in VIEWS] + ["models/gamma"] + [f"playground/{t}" for t in ("images", "speech", "transcription", "rerank", "load-test")]
        for view in views:
            self.page.goto(f"{self.server.url}/ui/{view}")
            expect(self.page.locator("#connection")).to_have_text("Live")
            expect(self.page.get_by_role("link", name="Playground")).to_be_visible()
            if view == "queue":
                expect(self.page.locator("tr.queue-row")).to_have_count(1)
                expect(self.page.locator("#running tr.running-row")).to_have_count(1)
            if view == "activity":
                expect(self.page.locator("tr.activity-row").first).to_be_visible()
            self.assert_fits_the_screen(view)
        self.release("alpha")
        self.assertEqual(held.result()[0], 200)
        self.assertEqual(waiting.result()[0], 200)

    def test_every_nav_entry_is_on_screen_and_clickable_in_every_view(self):
        for view, _ in VIEWS:
            for target, heading in VIEWS:
                self.page.goto(f"{self.server.url}/ui/{view}")
                link = self.page.get_by_role("navigation", name="Views").get_by_role("link", name=heading, exact=True)
                expect(link).to_be_visible()
                # On screen as it is (no scrolling the nav first), and the topmost
                # element at its centre, so a tap there reaches it.
                box = link.bounding_box()
                self.assertIsNotNone(box, f"{heading} in {view}")
                self.assertGreaterEqual(box["x"], 0, f"{heading} starts left of the screen in {view}")
                self.assertLessEqual(box["x"] + box["width"], 390, f"{heading} ends right of the screen in {view}")
                x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
                on_top = self.page.evaluate(
                    "([x, y, name]) => document.elementFromPoint(x, y)?.closest('nav a')?.textContent === name",
                    [x, y, heading],
                )
                self.assertTrue(on_top, f"{heading} is covered in {view}")
                self.page.mouse.click(x, y)
                expect(link).to_have_attribute("aria-current", "page")
                expect(self.page.locator("main h1").first).to_contain_text(heading)

    def assert_fits_the_screen(self, view: str):
        overflow = self.page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        self.assertLessEqual(overflow, 0, f"{view} scrolls sideways on a phone")
        # No table or nav scrolls sideways inside its box either: tables reflow
        # into stacked rows, the nav wraps.
        scrolling = self.page.evaluate(
            """() => [...document.querySelectorAll('.table-wrap, nav, nav ul')]
                .filter((el) => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
                .map((el) => el.tagName + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth)"""
        )
        self.assertEqual(scrolling, [], f"{view} has boxes that scroll sideways on a phone")
        # Nothing sticks out of the screen, but inside the containers meant to
        # scroll (log text, the load test's timeline chart, dialogs, menus).
        sticking_out = self.page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                .filter((el) => !el.closest('.logs, dialog, .timeline, [popover], .offscreen'))
                .filter((el) => el.getBoundingClientRect().right > innerWidth + 1)
                .map((el) => el.tagName + '.' + el.className)"""
        )
        self.assertEqual(sticking_out, [], f"{view} on a phone")


def contrast(page) -> float:
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


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


class Dark(UiTest):
    color_scheme = "dark"

    def test_the_system_dark_mode_gives_a_dark_page_with_readable_text(self):
        page = self.open("models")
        self.assertEqual(background(page), "rgb(17, 19, 23)")
        self.assertGreaterEqual(contrast(page), 7.0)


class Settings(UiTest):
    def test_the_system_light_mode_gives_a_light_page_with_readable_text(self):
        page = self.open("models")
        self.assertEqual(background(page), "rgb(247, 247, 248)")
        self.assertGreaterEqual(contrast(page), 7.0)

    def test_a_chosen_theme_overrides_the_system_and_survives_a_reload(self):
        page = self.open("settings")
        page.get_by_label("Dark").check()
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        self.assertEqual(background(page), "rgb(17, 19, 23)")
        self.assertGreaterEqual(contrast(page), 7.0)
        page.goto(f"{self.server.url}/ui/queue")
        self.assertEqual(background(page), "rgb(17, 19, 23)")
        page.goto(f"{self.server.url}/ui/settings")
        expect(page.get_by_label("Dark")).to_be_checked()
        page.get_by_label("Accent colour").select_option("green")
        expect(page.locator("html")).to_have_attribute("data-accent", "green")
        page.get_by_label("System").check()
        expect(page.locator("html")).not_to_have_attribute("data-theme", "dark")
        self.assertEqual(background(page), "rgb(247, 247, 248)")

    def test_the_page_title_can_be_changed_and_is_kept(self):
        page = self.open("settings")
        title = page.get_by_label("Page title")
        title.fill("Lab GPU box")
        title.press("Enter")
        title.blur()
        expect(page.locator("#app-title")).to_have_text("Lab GPU box")
        expect(page).to_have_title("Settings · Lab GPU box")
        page.goto(f"{self.server.url}/ui/queue")
        expect(page).to_have_title("Queue · Lab GPU box")
        page.goto(f"{self.server.url}/ui/settings")
        page.get_by_role("button", name="Reset title").click()
        expect(page.locator("#app-title")).to_have_text("llama-swap-rs")

    def test_the_server_version_and_bands_are_shown(self):
        page = self.open("settings")
        info = page.locator("#build-info")
        expect(info.locator('[data-key="version"]')).to_have_text(re.compile(r"^\d+\.\d+\.\d+"))
        expect(info.locator('[data-key="event-stream"]')).to_have_text("live")
        expect(info.locator('[data-key="priority-bands"]')).to_contain_text("elevated")
        # The build: the commit and its date as /api/version gives them.
        version = self.server.json("GET", "/api/version")
        expect(info.locator('[data-key="commit"]')).to_have_text((version.get("commit") or "unknown")[:12])
        expect(info.locator('[data-key="build-date"]')).to_have_text(version.get("build_date") or "unknown")


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

    def test_the_key_column_and_filter_name_the_key_a_request_used(self):
        self.context.add_init_script("localStorage.setItem('llamaswap.apiKey', 'sk-right')")
        self.assertEqual(self.keyed.chat("gamma", "with the first key")[0], 200)
        page = self.open("activity")
        rows = page.locator("tr.activity-row")
        expect(rows.first).to_have_attribute("data-model", "gamma")
        history = page.locator("section.history")
        history.get_by_role("button", name="Columns").click()
        page.get_by_role("group", name="Shown columns").get_by_label("Key").check()
        page.keyboard.press("Escape")
        # Named by position in apiKeys, never by the key itself.
        expect(rows.first.locator('td[data-column="key"]')).to_have_text("key0")
        expect(page.locator("main")).not_to_contain_text("sk-right")
        history.get_by_role("button", name="Filters").click()
        key = page.get_by_role("region", name="Filters").get_by_label("Key")
        key.fill("key1")
        key.press("Tab")
        expect(rows).to_have_count(0)
        expect(history).to_contain_text("No requests recorded yet.")
        key.fill("key0")
        key.press("Tab")
        expect(rows.first.locator('td[data-column="key"]')).to_have_text("key0")
        self.assertEqual(set(rows.locator('td[data-column="key"]').all_text_contents()), {"key0"})

    def test_the_page_asks_for_the_key_refuses_a_wrong_one_and_works_with_the_right_one(self):
        self.keyed.json("POST", "/api/models/unload")
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
        # The page's own calls carry it: a button, the history, the playground.
        self.card("gamma").get_by_role("button", name="Load gamma", exact=True).click()
        expect(self.card("gamma").locator(".badge")).to_have_text("ready")
        page.get_by_role("link", name="Playground").click()
        page.select_option("#pg-model", "gamma")
        page.fill("#pg-prompt", "with the key")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant").last.locator(".content")).to_have_text("[gamma] with the key")
        page.get_by_role("link", name="Activity").click()
        expect(page.locator("tr.activity-row").first).to_have_attribute("data-model", "gamma")
        # Settings forgets it: the next load asks again.
        page.get_by_role("link", name="Settings").click()
        page.get_by_role("button", name="Forget the API key").click()
        page.reload()
        expect(page.get_by_role("dialog")).to_be_visible()


class Performance(UiTest):
    def test_the_hardware_is_shown_as_the_server_detected_it(self):
        hardware = self.server.json("GET", "/api/hardware")
        page = self.open("performance")
        section = page.locator("#hardware")
        cpu = section.locator(".hw-card", has=page.get_by_role("heading", name="CPU"))
        expect(cpu).to_contain_text(hardware["cpu"]["model"])
        expect(cpu).to_contain_text(str(hardware["cpu"]["logical_thread_count"]))
        gib = f"{hardware['memory']['capacity_bytes'] / 1024**3:.1f} GiB"
        expect(section.locator(".hw-card", has=page.get_by_role("heading", name="Memory"))).to_contain_text(gib)
        expect(section.locator(".hw-card", has=page.get_by_role("heading", name="System"))).to_contain_text(
            hardware["operating_system"]["kernel"]
        )
        # llama-swap's /ui/#/hardware link lands here too.
        page.goto(f"{self.server.url}/ui/#/hardware")
        expect(page).to_have_url(f"{self.server.url}/ui/hardware")
        expect(page.locator("main h1").first).to_have_text("Performance")
        expect(page.locator("#hardware .hw-card").first).to_be_visible()

    def test_the_host_charts_are_drawn_from_the_servers_samples(self):
        page = self.open("performance")
        # The server samples every `performance.every` (5 s at least): wait for two samples.
        page.wait_for_function(
            "async () => ((await (await fetch('/api/performance')).json()).sys_stats || []).length >= 2",
            polling=500,
        )
        page.get_by_role("button", name="Refresh now").click()
        for chart in ("cpu", "memory", "load"):
            box = page.locator(f'#perf-charts [data-chart="{chart}"]')
            expect(box).to_have_attribute("data-points", re.compile(r"^([2-9]|\d{2,})$"))
            expect(box.locator("canvas").first).to_be_visible()
        latest = self.server.json("GET", "/api/performance")["sys_stats"][-1]
        cpu = page.locator("figure", has=page.locator('[data-chart="cpu"]'))
        expect(cpu.locator("figcaption")).to_contain_text(f"{len(latest['cpu_util_per_core'])} cores")
        memory = page.locator("figure", has=page.locator('[data-chart="memory"]'))
        expect(memory.locator("figcaption")).to_contain_text(" of ")
        expect(page.locator("#perf-status")).to_contain_text("samples; the latest at")

    def test_each_gpu_is_a_line_in_the_gpu_charts_with_its_memory_in_the_caption(self):
        # This machine has no GPU: the page is given llama-swap's shape of two GPUs'
        # samples (three each), as a server with nvidia-smi answers /api/performance.
        now = datetime.now(timezone.utc)

        def at(seconds_ago: int) -> str:
            return (now - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")

        def gpu(i: int, name: str, seconds_ago: int, used_mb: int, util: float) -> dict:
            return {
                "timestamp": at(seconds_ago), "id": i, "name": name, "uuid": f"GPU-{i}",
                "temp_c": 60 + i, "vram_temp_c": 0, "gpu_util_pct": util, "mem_util_pct": 10.0,
                "mem_used_mb": used_mb, "mem_total_mb": 24576, "fan_speed_pct": 30.0,
                "power_draw_w": 150.0 + i,
            }

        body = {
            "sys_stats": [],
            "gpu_stats": [
                gpu(i, name, ago, used, util)
                for ago, used, util in ((20, 4096, 10.0), (10, 8192, 55.0), (1, 12288, 97.5))
                for i, name in ((0, "RTX A"), (1, "RTX B"))
            ],
        }
        self.page.route(
            re.compile(r".*/api/performance(\?.*)?$"),
            lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(body)),
        )
        page = self.open("performance")
        charts = page.locator("#gpu-charts")
        for chart in ("gpu-util", "gpu-mem", "gpu-temp", "gpu-power"):
            box = charts.locator(f'[data-chart="{chart}"]')
            expect(box).to_have_attribute("data-points", "3")
            expect(box.locator("canvas").first).to_be_visible()
        # One legend entry per GPU in each chart, named as the server names it.
        legend = charts.locator('[data-chart="gpu-mem"] .u-legend')
        expect(legend).to_contain_text("RTX A")
        expect(legend).to_contain_text("RTX B")
        memory = page.locator("figure", has=page.locator('[data-chart="gpu-mem"]'))
        expect(memory.locator("figcaption")).to_contain_text("RTX A: 12.0 GB of 24.0 GB · RTX B: 12.0 GB of 24.0 GB")
        utilisation = page.locator("figure", has=page.locator('[data-chart="gpu-util"]'))
        expect(utilisation.locator("figcaption")).to_contain_text("RTX A: 97.5 %")
        expect(charts).not_to_contain_text("No GPU samples")

