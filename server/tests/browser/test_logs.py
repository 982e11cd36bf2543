"""The Logs view: proxy and upstream panes, ANSI colours, the filter, and
following the end until the reader scrolls up."""

from __future__ import annotations

from uitest import UiTest, expect


class Logs(UiTest):
    def test_the_panes_show_the_proxy_and_each_model_and_the_model_filter_narrows_upstream(self):
        self.unload_all()
        self.server.json("POST", "/api/models/load/gamma")
        self.server.json("POST", "/api/models/load/beta")
        page = self.open("logs")
        upstream = page.locator("#upstream-log")
        proxy = page.locator("#proxy-log")
        gamma = upstream.locator('.log-line[data-model="gamma"]')
        beta = upstream.locator('.log-line[data-model="beta"]')
        expect(gamma.first).to_contain_text("[gamma]")
        expect(beta.first).to_contain_text("[beta]")
        expect(upstream.locator('.log-line[data-source="proxy"]')).to_have_count(0)
        # The proxy's own log, its lines about a model tagged with it.
        expect(proxy.locator('.log-line[data-model="gamma"]').first).to_contain_text("[gamma]")
        expect(proxy.locator('.log-line[data-source="upstream"]')).to_have_count(0)
        page.get_by_label("Model", exact=True).select_option("gamma")
        expect(beta).to_have_count(0)
        expect(gamma.first).to_be_visible()
        # One pane at a time.
        page.get_by_role("tab", name="Upstream").click()
        expect(proxy).to_be_hidden()
        expect(upstream).to_be_visible()
        page.get_by_role("tab", name="Proxy").click()
        expect(upstream).to_be_hidden()
        page.reload()
        expect(page.locator("#proxy-log")).to_be_visible()
        expect(page.locator("#upstream-log")).to_be_hidden()
        page.get_by_role("tab", name="Both").click()
        expect(page.locator("#upstream-log")).to_be_visible()

    def test_ansi_colours_render_as_colours_not_escape_codes(self):
        self.unload_all()
        self.server.json("POST", "/api/models/load/gamma")
        page = self.open("logs")
        # The newest start's banner (each start of gamma prints one).
        line = page.locator('#upstream-log .log-line[data-model="gamma"]', has_text="red alert").last
        expect(line).to_be_visible()
        expect(line).not_to_contain_text("[31m")
        expect(line).to_contain_text("red alert then green light plain")
        red = line.locator("span.ansi-red-fg", has_text="red alert")
        green = line.locator("span.ansi-green-fg", has_text="green light")
        expect(red).to_have_css("font-weight", "700")
        expect(green).to_be_visible()
        self.assertNotEqual(red.evaluate("e => getComputedStyle(e).color"), green.evaluate("e => getComputedStyle(e).color"))

    def test_the_filter_keeps_the_matching_lines_text_or_regex(self):
        self.unload_all()
        self.server.json("POST", "/api/models/load/gamma")
        page = self.open("logs")
        pane = page.locator("#upstream-log")
        expect(pane.locator(".log-line", has_text="red alert").first).to_be_visible()
        lines = pane.locator(".log-line")
        search = page.get_by_label("Filter Upstream")

        def only_banners():
            texts = lines.all_text_contents()
            return bool(texts) and all("green light" in t for t in texts)

        for query in ("GREEN LIGHT", "/gre+n\\s+light/"):
            search.fill(query)
            expect(lines.first).to_contain_text("green light")
            page.wait_for_function(
                "() => [...document.querySelectorAll('#upstream-log .log-line')].every((l) => l.textContent.includes('green light'))"
            )
            self.assertTrue(only_banners(), query)
        shown = lines.count()
        search.fill("no line says this")
        expect(lines).to_have_count(0)
        expect(pane).to_contain_text("No line matches the filter.")
        search.fill("")
        expect(lines.nth(shown)).to_be_attached()
        self.assertFalse(only_banners())

class Following(UiTest):
    viewport = {"width": 1000, "height": 560}

    def test_the_pane_follows_new_lines_until_the_reader_scrolls_up(self):
        self.unload_all()
        page = self.open("logs")
        page.get_by_role("tab", name="Proxy").click()
        pane = page.locator("#proxy-log")
        follow = page.locator("#proxy-log").locator("xpath=..").get_by_role("button", name="Follow")

        def lines():
            return pane.locator(".log-line").count()

        # Enough lines to scroll.
        for i in range(25):
            self.assertEqual(self.server.chat("beta", f"line maker {i}")[0], 200)
        page.wait_for_function("() => { const p = document.getElementById('proxy-log'); return p.scrollHeight > p.clientHeight * 2; }")
        at_end = "() => { const p = document.getElementById('proxy-log'); return p.scrollTop + p.clientHeight >= p.scrollHeight - 24; }"
        page.wait_for_function(at_end)
        expect(follow).to_have_attribute("aria-pressed", "true")
        # The reader scrolls up: following stops and new lines do not move the view.
        pane.evaluate("p => { p.scrollTop = 0; p.dispatchEvent(new Event('scroll')); }")
        expect(follow).to_have_attribute("aria-pressed", "false")
        before = lines()
        for i in range(5):
            self.assertEqual(self.server.chat("beta", f"while reading {i}")[0], 200)
        page.wait_for_function(f"() => document.querySelectorAll('#proxy-log .log-line').length > {before}")
        self.assertEqual(pane.evaluate("p => p.scrollTop"), 0)
        # Follow again: straight to the end, and it stays there.
        follow.click()
        expect(follow).to_have_attribute("aria-pressed", "true")
        page.wait_for_function(at_end)
        before = lines()
        self.assertEqual(self.server.chat("beta", "after following again")[0], 200)
        page.wait_for_function(f"() => document.querySelectorAll('#proxy-log .log-line').length > {before}")
        page.wait_for_function(at_end)
