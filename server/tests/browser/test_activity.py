"""The Activity view: the history's rows, sorting, paging, filters, export,
statistics and histograms."""

from __future__ import annotations

import re

from uitest import UiTest, expect


class Activity(UiTest):
    def test_finished_requests_are_listed_with_their_priority_status_and_tokens(self):
        self.unload_all()
        for model, text, priority in [("beta", "low one", "-10"), ("beta", "top one", "10"), ("gamma", "plain", None)]:
            self.assertEqual(self.server.chat(model, text, priority)[0], 200)
        page = self.open("activity")
        newest = page.locator("tr.activity-row:nth-child(-n+3)")
        for model, priority in [("gamma", "0 normal"), ("beta", "+10 elevated"), ("beta", "-10 low")]:
            row = newest.filter(has=page.locator(f'td[data-column="priority"]:has-text("{priority}")')).filter(has_text=model)
            expect(row).to_have_count(1)
            expect(row.locator('td[data-column="status"]')).to_have_text("200")
            # Tokens as the upstream reported them.
            expect(row.locator('td[data-column="prompt"]')).to_have_text(re.compile(r"^\d+$"))
            expect(row.locator('td[data-column="generated"]')).to_have_text(re.compile(r"^[1-9]\d*$"))
        # Newest first by default.
        ids = page.locator("tr.activity-row").evaluate_all("els => els.map(e => Number(e.dataset.id))")
        self.assertEqual(ids, sorted(ids, reverse=True))

    def test_sorting_paging_and_a_model_filter_read_the_history_again(self):
        self.unload_all()
        for i in range(12):
            self.assertEqual(self.server.chat("beta", f"page filler {i}")[0], 200)
        self.assertEqual(self.server.chat("gamma", "the only gamma one")[0], 200)
        page = self.open("activity")
        page.get_by_role("button", name="Filters").click()
        page.get_by_label("Rows per page").select_option("10")
        rows = page.locator("tr.activity-row")
        expect(rows).to_have_count(10)
        # Paging.
        pager = page.get_by_role("navigation", name="Requests pages")
        expect(pager).to_contain_text("Page 1 of")
        first_page = rows.evaluate_all("els => els.map(e => e.dataset.id)")
        pager.get_by_role("button", name="Next page").click()
        expect(pager).to_contain_text("Page 2 of")
        expect(rows.first).not_to_have_attribute("data-id", first_page[0])
        second_page = rows.evaluate_all("els => els.map(e => e.dataset.id)")
        self.assertFalse(set(first_page) & set(second_page))
        # Sorting by id: newest first at the start, a click turns it round.
        expect(page.locator('th[data-column="id"]')).to_have_attribute("aria-sort", "descending")
        page.get_by_role("button", name="ID", exact=True).click()
        expect(page.locator('th[data-column="id"]')).to_have_attribute("aria-sort", "ascending")
        expect(pager).to_contain_text("Page 1 of")
        ids = rows.evaluate_all("els => els.map(e => Number(e.dataset.id))")
        self.assertEqual(ids, sorted(ids))
        # Another column: by duration, longest first.
        page.get_by_role("button", name="Duration", exact=True).click()
        expect(page.locator('th[data-column="duration"]')).to_have_attribute("aria-sort", "descending")
        # A model filter.
        page.get_by_role("group", name="Models").get_by_label("gamma").check()
        expect(page.get_by_role("button", name="Filters (1)")).to_be_visible()
        expect(rows.first).to_have_attribute("data-model", "gamma")
        self.assertEqual(set(rows.evaluate_all("els => els.map(e => e.dataset.model)")), {"gamma"})
        page.get_by_role("button", name="Clear filters").click()
        expect(page.get_by_role("button", name="Filters", exact=True)).to_be_visible()

    def test_the_export_holds_the_rows_under_the_filters_as_markdown(self):
        self.unload_all()
        self.assertEqual(self.server.chat("gamma", "export me")[0], 200)
        self.assertEqual(self.server.chat("beta", "not me")[0], 200)
        page = self.open("activity")
        page.get_by_role("button", name="Filters").click()
        page.get_by_role("group", name="Models").get_by_label("gamma").check()
        expect(page.locator("tr.activity-row").first).to_have_attribute("data-model", "gamma")
        shown = page.locator("tr.activity-row").count()
        page.get_by_role("button", name="Export").click()
        dialog = page.get_by_role("dialog")
        markdown = dialog.locator("#export-markdown")
        expect(markdown).to_contain_text("| Summary | |")
        text = markdown.text_content()
        table = [line for line in text.splitlines() if "| gamma |" in line]
        self.assertEqual(len(table), shown, text)
        self.assertNotIn("| beta |", text)
        self.assertIn("| Filters | models gamma |", text)
        self.assertIn("Exported from llama-swap-rs", text)
        dialog.get_by_role("button", name="Copy the markdown").click()
        self.assertEqual(page.evaluate("navigator.clipboard.readText()"), text)
        with page.expect_download() as download:
            dialog.get_by_role("link", name="Download").click()
        self.assertEqual(download.value.suggested_filename, "activity.md")
        dialog.get_by_role("button", name="Close").click()
        expect(page.get_by_role("dialog")).to_have_count(0)

    def test_statistics_and_a_histogram_are_drawn_with_data(self):
        self.unload_all()
        for i in range(3):
            self.assertEqual(self.server.chat("beta", f"stats {i}", "10")[0], 200)
        # A stream: the server measures its generation speed (a whole answer has none
        # without the upstream's own timings, as in llama-swap).
        status, _ = self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": "beta", "stream": True, "messages": [{"role": "user", "content": "stats streamed"}]},
            headers={"X-Priority": "10"},
        )
        self.assertEqual(status, 200)
        page = self.open("activity")
        expect(page.locator('#activity-totals [data-key="requests"] strong')).not_to_have_text("0")
        band = page.locator('#band-histograms [data-band="elevated"]')
        expect(band).to_be_visible()
        bars = band.locator(".h-latency rect.bar")
        expect(bars.first).to_be_attached()
        counts = bars.evaluate_all("els => els.map(e => Number(e.dataset.count))")
        self.assertGreaterEqual(sum(counts), 3)
        # Tokens per request, and the server's generation speeds, drawn with data too.
        # Queue wait per band too.
        waits = band.locator(".h-queue rect.bar").evaluate_all("els => els.map(e => Number(e.dataset.count))")
        self.assertGreaterEqual(sum(waits), 3)
        for chart in ("#prompt-tokens-histogram", "#generated-tokens-histogram", "#gen-histogram"):
            drawn = page.locator(f"{chart} rect.bar").evaluate_all("els => els.map(e => Number(e.dataset.count))")
            self.assertGreater(sum(drawn), 0, chart)
        # The charts can be folded away, and stay so.
        page.get_by_role("button", name="Hide charts").click()
        expect(page.locator("#activity-charts")).to_be_hidden()
        page.reload()
        expect(page.get_by_role("button", name="Show charts")).to_be_visible()
        page.get_by_role("button", name="Show charts").click()
        expect(page.locator("#activity-charts")).to_be_visible()

    def test_the_capture_dialog_shows_a_request_with_its_authorization_redacted(self):
        status, _ = self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": "beta", "stream": True, "messages": [{"role": "user", "content": "capture me"}]},
            headers={"Authorization": "Bearer sk-secret-123", "X-Session-ID": "sess-cap"},
        )
        self.assertEqual(status, 200)
        page = self.open("activity")
        row = page.locator('tr.activity-row[data-model="beta"]').first
        expect(row.locator('td[data-column="status"]')).to_have_text("200")
        row.get_by_role("button", name=re.compile(r"^View the capture of request \d+$")).click()
        dialog = page.get_by_role("dialog")
        expect(dialog.get_by_role("heading")).to_contain_text("Capture of request")
        auth = dialog.locator('tr[data-header="authorization"]')
        expect(auth).to_contain_text("[REDACTED]")
        expect(auth.locator(".redacted-badge")).to_have_text("redacted")
        expect(dialog).not_to_contain_text("sk-secret-123")
        # The request's JSON pretty-printed; the streamed answer put back together.
        request = dialog.locator('pre[data-body="request"]')
        expect(request).to_contain_text('"content": "capture me"')
        self.assertIn('\n  "model": "beta"', request.text_content())
        response = dialog.locator('pre[data-body="response"]')
        expect(response).to_have_text("[beta] capture me")
        dialog.get_by_role("button", name="Raw").last.click()
        expect(response).to_contain_text("data: ")
        dialog.get_by_role("button", name="Close").click()
        expect(page.get_by_role("dialog")).to_have_count(0)

    def test_the_capture_dialog_says_when_a_route_leaves_a_body_out(self):
        # Speech answers are audio: as in llama-swap, their captures keep the request
        # but not the response's body (the API says null, not "").
        status, _ = self.server.request(
            "POST",
            "/v1/audio/speech",
            body={"model": "beta", "input": "say this aloud", "voice": "alloy"},
        )
        self.assertEqual(status, 200)
        page = self.open("activity")
        row = page.locator('tr.activity-row[data-model="beta"]').first
        row.get_by_role("button", name=re.compile(r"^View the capture of request \d+$")).click()
        dialog = page.get_by_role("dialog")
        expect(dialog.get_by_role("heading")).to_contain_text("Capture of request")
        expect(dialog.locator(".capture-path")).to_have_text("POST /v1/audio/speech")
        expect(dialog.locator('pre[data-body="request"]')).to_contain_text('"input": "say this aloud"')
        expect(dialog.get_by_text("(not captured on this route)")).to_have_count(1)
        expect(dialog.locator('pre[data-body="response"]')).to_have_count(0)
        dialog.get_by_role("button", name="Close").click()

    def test_the_status_filter_keeps_the_failed_requests(self):
        self.server.json("POST", "/api/models/load/gamma")
        self.server.mock("gamma", "POST", "/__mockswap/faults", {"fault": {"type": "status", "status": 500}, "times": 1})
        self.assertEqual(self.server.chat("gamma", "fails")[0], 500)
        self.assertEqual(self.server.chat("gamma", "works")[0], 200)
        page = self.open("activity")
        page.get_by_role("button", name="Filters").click()
        page.get_by_role("combobox", name="Status").select_option("error")
        rows = page.locator("tr.activity-row")
        expect(rows.first.locator('td[data-column="status"]')).to_have_text(re.compile(r"^500"))
        statuses = rows.locator('td[data-column="status"]').all_text_contents()
        self.assertTrue(all(not s.startswith("200") for s in statuses), statuses)

    def test_hidden_columns_can_be_shown_shown_ones_hidden_and_the_choice_is_kept(self):
        status, _ = self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": "beta", "messages": [{"role": "user", "content": "columns"}]},
            headers={"X-Session-ID": "sess-columns"},
        )
        self.assertEqual(status, 200)
        page = self.open("activity")
        table = page.locator("#activity-table")
        newest = page.locator("tr.activity-row").first
        expect(newest).to_have_attribute("data-model", "beta")
        # The session is hidden at first, the prefill speed shown.
        expect(table.locator('th[data-column="session"]')).to_have_count(0)
        expect(table.locator('th[data-column="prefill"]')).to_have_count(1)
        page.locator("section.history").get_by_role("button", name="Columns").click()
        shown = page.get_by_role("group", name="Shown columns")
        shown.get_by_label("Session").check()
        shown.get_by_label("Prefill").uncheck()
        page.keyboard.press("Escape")
        expect(newest.locator('td[data-column="session"]')).to_have_text("sess-columns")
        expect(table.locator('th[data-column="prefill"]')).to_have_count(0)
        page.reload()
        expect(page.locator("tr.activity-row").first.locator('td[data-column="session"]')).to_have_text("sess-columns")
        expect(page.locator('#activity-table th[data-column="prefill"]')).to_have_count(0)

    def test_the_band_filter_keeps_the_requests_of_that_band(self):
        for text, priority in [("band low", "-10"), ("band top", "10"), ("band plain", None)]:
            self.assertEqual(self.server.chat("beta", text, priority)[0], 200)
        page = self.open("activity")
        rows = page.locator("tr.activity-row")
        expect(rows.first.locator('td[data-column="priority"] .badge')).to_have_text("0 normal")
        page.get_by_role("button", name="Filters").click()
        page.get_by_label("Priority band").select_option("elevated")
        expect(page.get_by_role("button", name="Filters (1)")).to_be_visible()
        expect(rows.first.locator('td[data-column="priority"] .badge')).to_have_text("+10 elevated")
        bands = rows.locator('td[data-column="priority"] .badge').all_text_contents()
        self.assertTrue(bands and all(b.endswith(" elevated") for b in bands), bands)
        # The same rows the server gives for that band.
        expected = [str(r["id"]) for r in self.server.json("GET", "/api/metrics/activity?band=elevated&limit=25")["data"]]
        self.assertEqual(rows.evaluate_all("els => els.map(e => e.dataset.id)"), expected)

    def test_the_time_range_keeps_the_requests_between_from_and_to(self):
        self.assertEqual(self.server.chat("beta", "timed")[0], 200)
        newest = self.server.json("GET", "/api/metrics/activity?limit=1")["data"][0]
        page = self.open("activity")
        rows = page.locator("tr.activity-row")
        mine = page.locator(f'tr.activity-row[data-id="{newest["id"]}"]')
        expect(mine).to_have_count(1)
        # The whole second the request started in, in the browser's own time zone.
        started = page.evaluate(f"Date.parse('{mine.locator('time').get_attribute('datetime')}')")
        second = started - started % 1000
        local = "ms => { const d = new Date(ms), p = (n) => String(n).padStart(2, '0');" \
            " return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`; }"

        def times():
            return rows.locator("time").evaluate_all("els => els.map(e => Date.parse(e.getAttribute('datetime')))")

        page.get_by_role("button", name="Filters").click()
        history = page.locator("section.history")
        page.get_by_label("From", exact=True).fill(page.evaluate(local, second))
        expect(page.get_by_role("button", name="Filters (1)")).to_be_visible()
        expect(history).to_have_attribute("aria-busy", "false")
        expect(mine).to_have_count(1)
        self.assertTrue(all(t >= second for t in times()), times())
        # Up to the second before it: that request is out.
        page.get_by_label("From", exact=True).fill("")
        page.get_by_label("To", exact=True).fill(page.evaluate(local, second - 1000))
        expect(page.get_by_role("button", name="Filters (1)")).to_be_visible()
        expect(history).to_have_attribute("aria-busy", "false")
        expect(mine).to_have_count(0)
        self.assertTrue(all(t < second for t in times()), times())
