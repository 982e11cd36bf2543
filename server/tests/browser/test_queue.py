"""The Queue view: waiting requests in rank order with their priorities and
reasons, the running ones with llama-swap's in-flight columns."""

from __future__ import annotations

import re

from uitest import Model, Server, UiTest, expect, has_class


class Queue(UiTest):
    def test_a_held_request_then_low_and_elevated_ones_wait_in_priority_order(self):
        self.unload_all()
        page = self.open("queue")
        held = self.server.in_background(self.server.chat, "alpha", "held", None)
        running = page.locator('#running tr.running-row[data-model="alpha"]')
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
        expect(first.locator(".badge").first).to_have_class(has_class("band-high"))
        expect(first).to_contain_text("+10 (Elevated)")
        expect(second).to_contain_text("#2")
        expect(second.locator(".badge").first).to_have_text("-10 low")
        expect(second.locator(".badge").first).to_have_class(has_class("band-low"))
        expect(second).to_contain_text("-10 (Low)")
        expect(page.locator("#waiting-title")).to_contain_text("(2)")
        # Both need alpha stopped before beta can start.
        expect(first.locator("td.reason")).to_have_text("swap")
        expect(second.locator("td.reason")).to_have_text("swap")
        # The running request with its priority and what it asked for.
        expect(running.locator('td[data-column="priority"]')).to_have_text("0 normal")
        expect(running.locator('td[data-column="request"]')).to_contain_text("/v1/chat/completions")
        expect(page.locator('#active-models [data-model="alpha"]')).to_contain_text("1 running · 0 waiting")
        self.server.mock("alpha", "POST", "/__mockswap/gate", {"open": True})
        for call in (held, low, elevated):
            status, _ = call.result()
            self.assertEqual(status, 200)
        expect(rows).to_have_count(0)

    def test_cancel_ends_a_waiting_and_a_running_request(self):
        self.unload_all()
        page = self.open("queue")
        held = self.server.in_background(self.session_chat, "alpha", "held then cancelled", "sess-held")
        running = page.locator('#running tr.running-row[data-model="alpha"]')
        expect(running).to_have_count(1)
        self.server.mock("alpha", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        # llama-swap's in-flight columns: who sent it and from where.
        expect(running.locator('td[data-column="address"]')).to_have_text("127.0.0.1")
        expect(running.locator('td[data-column="agent"]')).to_contain_text("Python-urllib")
        expect(running.locator('td[data-column="session"]')).to_have_text("sess-held")
        waiting = self.server.in_background(self.server.chat, "beta", "waits then cancelled", "-10")
        rows = page.locator("tr.queue-row")
        expect(rows).to_have_count(1)
        # The waiting one first: it leaves the queue and its client is answered.
        rows.first.get_by_role("button", name=re.compile(r"^Cancel waiting request \S+ to beta$")).click()
        expect(rows).to_have_count(0)
        status, body = waiting.result()
        self.assertEqual(status, 503, body)
        self.assertIn(b"cancelled", body)
        # Then the running one: cut while its model holds it at the gate.
        running.get_by_role("button", name=re.compile(r"^Cancel running request \S+ to alpha$")).click()
        expect(running).to_have_count(0)
        status, body = held.result()
        self.assertGreaterEqual(status, 500, body)
        expect(page.locator("#toasts")).to_contain_text("Cancelled running request")
        # Both are in the history as cancelled.
        failed = self.server.json("GET", "/api/metrics/activity?status=error&limit=2")["data"]
        self.assertEqual({r["model"] for r in failed}, {"alpha", "beta"})
        self.server.mock("alpha", "POST", "/__mockswap/gate", {"open": True})

    def test_a_running_stream_shows_the_bytes_sent_so_far(self):
        self.server.json("POST", "/api/models/load/gamma")
        # Two frames, then the stream stalls with its connection open: the row stays.
        self.server.mock("gamma", "POST", "/__mockswap/faults", {"fault": {"type": "stall_after", "after": 2}, "times": 1})
        page = self.open("queue")
        stream = self.server.in_background(
            self.server.request,
            "POST",
            "/v1/chat/completions",
            {"model": "gamma", "stream": True, "messages": [{"role": "user", "content": "stalls"}]},
        )
        running = page.locator('#running tr.running-row[data-model="gamma"]')
        expect(running).to_have_count(1)
        # Nothing was sent before the first frame; now some hundred bytes were.
        expect(running.locator('td[data-column="bytes"]')).to_have_text(re.compile(r"^[1-9]\d* B$"))
        running.get_by_role("button", name=re.compile(r"^Cancel running request \S+ to gamma$")).click()
        expect(running).to_have_count(0)
        status, body = stream.result()
        self.assertEqual(status, 200, body)
        self.assertIn(b"data:", body)
        self.server.mock("gamma", "DELETE", "/__mockswap/faults")

    def session_chat(self, model: str, text: str, session: str):
        return self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": model, "messages": [{"role": "user", "content": text}]},
            headers={"X-Session-ID": session},
        )

    def test_columns_can_be_hidden_and_stay_hidden(self):
        page = self.open("queue")
        table = page.locator("#waiting-table")
        expect(table.locator('th[data-column="seq"]')).to_have_count(1)
        page.locator("#waiting-title").locator("xpath=..").get_by_role("button", name="Columns").click()
        page.get_by_role("checkbox", name="Seq").uncheck()
        expect(table.locator('th[data-column="seq"]')).to_have_count(0)
        page.keyboard.press("Escape")
        page.reload()
        expect(page.locator("#waiting-table")).to_be_visible()
        expect(page.locator('#waiting-table th[data-column="seq"]')).to_have_count(0)
        expect(page.locator('#waiting-table th[data-column="reason"]')).to_have_count(1)


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
        expect(page.locator('#running tr.running-row[data-model="delta"]')).to_have_count(1)
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


KEYS_YAML = """\
keys:
  - {key: sk-admin-secret, name: admin, admin: true}
  - {key: sk-bot-secret, name: bot}
  - {key: sk-batch-secret, name: batch}
"""


class KeyNames(UiTest):
    """A server of its own with named API keys (issue 29): the queue and
    running tables say which key waits and which runs, by name, never by
    the key itself."""

    @classmethod
    def setUpClass(cls):
        cls.own = Server(
            [Model("delta", "Delta (one slot)", "One request at a time", ["--gate-closed"], yaml=["parallel: 1"])],
            api_keys=["sk-admin-secret", "sk-bot-secret", "sk-batch-secret"],
            extra_yaml=KEYS_YAML,
        ).start()

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()

    @property
    def server(self) -> Server:
        return self.own

    def chat_as(self, key: str, text: str):
        return self.server.request(
            "POST",
            "/v1/chat/completions",
            body={"model": "delta", "messages": [{"role": "user", "content": text}]},
            headers={"Authorization": f"Bearer {key}"},
        )

    def test_the_queue_and_running_tables_name_the_key_of_each_request(self):
        self.context.add_init_script("localStorage.setItem('llamaswap.apiKey', 'sk-admin-secret')")
        page = self.open("queue")
        held = self.server.in_background(self.chat_as, "sk-bot-secret", "held")
        running = page.locator('#running tr.running-row[data-model="delta"]')
        expect(running).to_have_count(1)
        self.server.mock("delta", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        waiting = self.server.in_background(self.chat_as, "sk-batch-secret", "waits")
        rows = page.locator("tr.queue-row")
        expect(rows).to_have_count(1)
        expect(running.locator('td[data-column="key"]')).to_have_text("bot")
        expect(rows.first.locator('td[data-column="key"]')).to_have_text("batch")
        expect(page.locator('#waiting-table th[data-column="key"]')).to_have_text("Key")
        # The model's own page says the same.
        page.goto(f"{self.server.url}/ui/models/delta")
        page.get_by_role("tab", name="Queue").click()
        expect(page.locator('#model-running td[data-column="key"]')).to_have_text("bot")
        expect(page.locator('#model-waiting td[data-column="key"]')).to_have_text("batch")
        expect(page.locator("body")).not_to_contain_text("secret")
        self.server.mock("delta", "POST", "/__mockswap/gate", {"open": True})
        for call in (held, waiting):
            status, body = call.result()
            self.assertEqual(status, 200, body)
        expect(page.locator("#model-running tr.running-row")).to_have_count(0)
