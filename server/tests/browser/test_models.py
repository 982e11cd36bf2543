"""The Models list (state, buttons, search, sort, pins, tags, profiles) and a
model's own page."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from harness import TIMEOUT_MS, binary
from uitest import MODELS, Model, Server, UiTest, expect, has_class


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
        expect(card.get_by_role("button", name=re.compile(r"^(Load|Unload) "))).to_have_count(0)
        self.server.json("POST", "/api/models/load/gamma")
        expect(card.locator(".badge")).to_have_text("ready")
        expect(self.page.locator(".toolbar h1")).to_contain_text(f"1 of {len(MODELS)} running")

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

    def test_search_narrows_the_list_by_name_alias_or_tag_and_sort_reorders_it(self):
        self.unload_all()
        page = self.open("models")
        cards = page.locator("article.model")
        expect(cards).to_have_count(len(MODELS) + 1)
        search = page.get_by_label("Search models")
        search.fill("gam")
        expect(cards).to_have_count(1)
        expect(cards.first).to_have_attribute("data-model", "gamma")
        # An alias, and a capability tag from the config's `capabilities`.
        search.fill("b")
        expect(self.card("beta")).to_be_visible()
        search.fill("tools")
        expect(cards).to_have_count(1)
        expect(cards.first).to_have_attribute("data-model", "gamma")
        search.fill("")
        self.server.json("POST", "/api/models/load/studio")
        page.get_by_label("Sort by").select_option("state")
        expect(cards.first).to_have_attribute("data-model", "studio")
        page.get_by_label("Sort by").select_option("id")
        ids = cards.evaluate_all("els => els.map(e => e.dataset.model)")
        self.assertEqual(ids, sorted(ids))

    def test_a_pinned_model_stays_on_top_and_stays_pinned_after_a_reload(self):
        page = self.open("models")
        cards = page.locator("article.model")
        expect(cards.first).not_to_have_attribute("data-model", "studio")
        pin = self.card("studio").get_by_role("button", name="Pin studio")
        expect(pin).to_have_attribute("aria-pressed", "false")
        pin.click()
        expect(cards.first).to_have_attribute("data-model", "studio")
        expect(self.card("studio").get_by_role("button", name="Unpin studio")).to_have_attribute("aria-pressed", "true")
        page.reload()
        expect(cards.first).to_have_attribute("data-model", "studio")
        self.card("studio").get_by_role("button", name="Unpin studio").click()
        expect(cards.first).not_to_have_attribute("data-model", "studio")

    def test_capability_tags_and_metadata_come_from_the_config(self):
        self.open("models")
        gamma = self.card("gamma")
        for tag in ("Vision", "Tools", "32K ctx"):
            expect(gamma.locator(".cap", has_text=tag)).to_have_count(1)
        studio = self.card("studio")
        for tag in ("Transcription", "Speech", "Image gen", "Reranker"):
            expect(studio.locator(".cap", has_text=tag)).to_have_count(1)
        beta = self.card("beta")
        expect(beta.locator(".cap")).to_have_count(0)
        beta.get_by_text("Metadata (2)").click()
        expect(beta.locator("dl.pairs")).to_contain_text("family")
        expect(beta.locator("dl.pairs")).to_contain_text("Q4_K_M")


class ModelPage(UiTest):
    def test_a_model_page_shows_its_details_activity_and_logs(self):
        self.unload_all()
        status, _ = self.server.chat("gamma", "for the model page")
        self.assertEqual(status, 200)
        self.assertEqual(self.server.chat("beta", "not gamma's")[0], 200)
        page = self.open("models")
        self.card("gamma").get_by_role("link", name="Gamma").click()
        expect(page).to_have_url(f"{self.server.url}/ui/models/gamma")
        expect(page.locator("main h1")).to_have_text("Gamma")
        expect(page.get_by_role("navigation", name="Views").get_by_role("link", name="Models")).to_have_attribute("aria-current", "page")
        expect(page.locator(".facts")).to_contain_text("Streams 8 tokens per second")
        expect(page.locator(".model-page-head .cap", has_text="Vision")).to_be_visible()
        # Activity: this model's requests only, without a model column.
        page.get_by_role("tab", name="Activity").click()
        rows = page.locator("tr.activity-row")
        expect(rows.first).to_be_visible()
        self.assertEqual(set(rows.evaluate_all("els => els.map(e => e.dataset.model)")), {"gamma"})
        expect(page.locator("#model-table th", has_text="Model")).to_have_count(0)
        # Logs: gamma's upstream lines and the proxy's lines about it, nothing of beta.
        page.get_by_role("tab", name="Logs").click()
        lines = page.locator("#model-log .log-line")
        expect(lines.filter(has_text="[gamma]").first).to_be_visible()
        expect(page.locator('#model-log .log-line[data-model="beta"]')).to_have_count(0)
        expect(page.locator('#model-log .log-line[data-source="proxy"]').first).to_contain_text("[proxy gamma]")
        # Load and Unload from the page (beta ran last, so gamma is stopped).
        badge = page.locator(".model-page-head .badge")
        expect(badge).to_have_text("stopped")
        page.get_by_role("button", name="Load gamma", exact=True).click()
        expect(badge).to_have_text("ready")
        page.get_by_role("button", name="Unload gamma").click()
        expect(badge).to_have_text("stopped")

    def test_a_model_page_shows_the_requests_waiting_for_that_model(self):
        self.unload_all()
        page = self.open("models/beta")
        page.get_by_role("tab", name="Queue").click()
        self.server.json("POST", "/api/models/load/alpha")
        held = self.server.in_background(self.server.chat, "alpha", "held", None)
        self.server.mock("alpha", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        waiting = self.server.in_background(self.server.chat, "beta", "waits for a swap", "-10")
        rows = page.locator("#model-waiting tr.queue-row")
        expect(rows).to_have_count(1)
        expect(rows.first.locator("td.reason")).to_have_text("swap")
        expect(rows.first.locator(".badge").first).to_have_text("-10 low")
        self.server.mock("alpha", "POST", "/__mockswap/gate", {"open": True})
        self.assertEqual(held.result()[0], 200)
        self.assertEqual(waiting.result()[0], 200)
        expect(rows).to_have_count(0)

    def test_a_model_page_shows_its_resolved_configuration(self):
        page = self.open("models/gamma")
        page.get_by_role("tab", name="Config").click()
        config = page.locator("#model-config")
        expect(config.locator("dt", has_text="cmd")).to_be_visible()
        expect(config).to_contain_text("mockswap")
        expect(config).to_contain_text("--tokens-per-second")
        expect(config.locator("dt", has_text="capabilities")).to_be_visible()
        expect(config).to_contain_text("32768")
        expect(config.locator("dt", has_text="proxy")).to_be_visible()

    def test_an_alias_opens_its_model_and_an_unknown_id_says_so(self):
        page = self.open("models/b")
        expect(page.locator("main h1")).to_have_text("Beta")
        page.goto(f"{self.server.url}/ui/models/no-such-model")
        expect(page.get_by_text("No model “no-such-model” is configured.")).to_be_visible()


class Peers(UiTest):
    """A server of its own with a peer: another server (a mockswap standing in
    for it) whose models this one forwards to."""

    @classmethod
    def setUpClass(cls):
        # Its first stdout line says where it listens, once it does.
        cls.peer = subprocess.Popen(
            [str(binary("mockswap", "MOCKSWAP_BIN")), "--listen", "127.0.0.1:0", "--gate-closed"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            first = cls.peer.stdout.readline().strip()
            if not first.startswith("listening on "):
                raise RuntimeError(f"the peer's mockswap did not start: {first!r}")
            cls.peer_url = first.removeprefix("listening on ").rstrip("/")
            threading.Thread(target=cls.peer.stdout.read, daemon=True).start()
            peers = f"peers:\n  lab:\n    proxy: {cls.peer_url}\n    models: [remote-7b]\n"
            cls.own = Server([Model("local", "Local", "Runs here")], extra_yaml=peers).start()
        except BaseException:
            cls.peer.kill()
            cls.peer.wait()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()
        cls.peer.kill()
        cls.peer.wait()

    @property
    def server(self) -> Server:
        return self.own

    def test_a_peer_model_is_listed_with_its_peer_its_requests_and_no_load_buttons(self):
        page = self.open("models")
        card = page.locator('article.model[data-kind="peer"]')
        expect(card).to_have_count(1)
        expect(card).to_contain_text("remote-7b")
        expect(card).to_contain_text("on peer lab")
        # Loaded and unloaded on its peer, not from here.
        expect(card.get_by_role("button", name=re.compile(r"^(Load|Unload) "))).to_have_count(0)
        expect(self.card("local").get_by_role("button", name="Load local", exact=True)).to_be_visible()
        # This server's request to it, live while the peer holds it.
        held = self.server.in_background(self.server.chat, "remote-7b", "to the peer", None)
        base = self.peer_url
        self.server.request("GET", f"/__mockswap/gate?wait_held=1&timeout_ms={TIMEOUT_MS}", base=base)
        expect(card).to_contain_text("1 running")
        self.server.request("POST", "/__mockswap/gate", body={"open": True}, base=base)
        status, body = held.result()
        self.assertEqual(status, 200, body)
        expect(card).not_to_contain_text("running")


GIB = 1024**3

# One 24 GiB GPU, 1 GiB kept free: two 20 GiB models do not fit together,
# unless one sleeps (keeping 2 GiB).
MEMORY_ROUTER = """\
routing:
  router:
    use: memory
    settings:
      memory:
        gpus: [{id: 0, memory: 24GiB}]
        reserve: 1GiB
"""


class MemoryPlacement(UiTest):
    """A server of its own under the memory router (issue 28): the Models view
    shows each GPU's used and free memory, each model's GPU and memory, and a
    model put to sleep to make room as `sleeping`."""

    @classmethod
    def setUpClass(cls):
        cls.own = Server(
            [
                Model(
                    "sleepy",
                    "Sleepy",
                    "Sleeps instead of stopping",
                    yaml=["memory: 20GiB", 'sleep: {sleep: "POST /sleep?level=1", wake: "POST /wake_up", memory: 2GiB}'],
                ),
                Model("other", "Other", "Takes the GPU", yaml=["memory: 20GiB"]),
            ],
            extra_yaml=MEMORY_ROUTER,
        ).start()

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()

    @property
    def server(self) -> Server:
        return self.own

    def test_each_gpu_and_model_shows_its_memory_and_a_model_put_to_sleep_shows_sleeping(self):
        self.unload_all()
        page = self.open("models")
        gpu = page.locator('#gpus [data-gpu="0"]')
        expect(gpu).to_contain_text("0 B used · 23.0 GB free of 24.0 GB")
        expect(gpu).to_contain_text("no model")
        self.server.json("POST", "/api/models/load/sleepy")
        sleepy = self.card("sleepy")
        expect(sleepy.locator(".badge")).to_have_text("ready")
        expect(sleepy.locator(".placement")).to_contain_text("20.0 GB on GPU 0")
        expect(sleepy.locator('.gpu-line[data-gpu="0"]')).to_contain_text("20.0 GB used · 3.00 GB free")
        expect(gpu).to_contain_text("20.0 GB used · 3.00 GB free of 24.0 GB")
        expect(gpu).to_contain_text("sleepy (ready)")
        self.assertEqual(gpu.locator("meter").get_attribute("value"), str(20 * GIB))
        # Loading the other model makes room by putting sleepy to sleep: it
        # keeps its process and 2 GiB.
        self.server.json("POST", "/api/models/load/other")
        expect(sleepy.locator(".badge")).to_have_text("sleeping")
        expect(sleepy.locator(".badge")).to_have_class(has_class("state-sleeping"))
        expect(sleepy.locator(".badge")).to_have_attribute("title", re.compile("asleep"))
        expect(sleepy.locator(".placement")).to_contain_text("2.00 GB on GPU 0")
        expect(self.card("other").locator(".placement")).to_contain_text("20.0 GB on GPU 0")
        expect(gpu).to_contain_text("22.0 GB used · 1.00 GB free of 24.0 GB")
        expect(gpu).to_contain_text("other (ready), sleepy (sleeping)")
        # A sleeping model counts as running; a stopped one shows no placement.
        expect(page.locator(".toolbar h1")).to_contain_text("2 of 2 running")
        self.unload_all()
        expect(sleepy.locator(".badge")).to_have_text("stopped")
        expect(sleepy.locator(".placement")).to_have_count(0)
        expect(gpu).to_contain_text("0 B used")

    def test_a_models_page_shows_its_gpu_and_memory(self):
        self.server.json("POST", "/api/models/load/other")
        page = self.open("models/other")
        expect(page.locator(".model-page-head .placement")).to_contain_text("20.0 GB on GPU 0")
        self.unload_all()
        expect(page.locator(".model-page-head .placement")).to_have_count(0)


class FailedModel(UiTest):
    """A server of its own with a model whose start fails until a file
    exists, failed after one failure (`maxRestarts: 1`, issue 29): the Models
    view shows it failed with its reason, last output and retry time, and its
    Load button clears it."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="llama-swap-ui-failed-")
        cls.flag = Path(cls.dir.name) / "weights.gguf"
        cls.own = Server(
            [
                Model(
                    "crashy",
                    "Crashy",
                    "Fails to start until its weights appear",
                    yaml=["maxRestarts: 1", "restartWindow: 600"],
                    shell_before=f'test -f {cls.flag} || {{ echo "cannot open weights.gguf: no such file" >&2; exit 3; }}',
                )
            ]
        ).start()

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()
        cls.dir.cleanup()

    @property
    def server(self) -> Server:
        return self.own

    def test_a_failed_model_shows_why_and_when_it_is_retried_and_load_clears_it(self):
        page = self.open("models")
        card = self.card("crashy")
        expect(card.locator(".badge")).to_have_text("stopped")
        status, body = self.server.chat("crashy", "start please")
        self.assertGreaterEqual(status, 500, body)
        badge = card.locator(".badge")
        expect(badge).to_have_text("failed")
        expect(badge).to_have_class(has_class("state-failed"))
        failure = card.get_by_role("group", name="Why crashy failed")
        expect(failure.locator(".failure-reason")).not_to_be_empty()
        expect(failure).to_contain_text("1 failure within 10 min 00 s")
        expect(failure).to_contain_text(re.compile(r"A new request starts it again from \d\d:\d\d:\d\d( [AP]M)?; Load retries it now\."))
        failure.get_by_text("Last output").click()
        expect(failure.locator("pre")).to_contain_text("cannot open weights.gguf: no such file")
        expect(page.locator(".toolbar h1")).to_contain_text("0 of 1 running")
        # The model's page says the same.
        page.goto(f"{self.server.url}/ui/models/crashy")
        expect(page.locator(".model-page-head .failure")).to_contain_text("1 failure within 10 min 00 s")
        page.go_back()
        # Its weights appear; Load clears the failure and starts it.
        self.flag.write_text("")
        card.get_by_role("button", name="Load crashy", exact=True).click()
        expect(badge).to_have_text("ready")
        expect(card.locator(".failure")).to_have_count(0)
        self.unload_all()


class FedStates(UiTest):
    """modelStatus rows as the server sends them, handed to the page's store
    (the path every /api/events event takes): what no model of the shared
    server shows by itself."""

    def feed(self, rows):
        self.page.evaluate(
            "async (rows) => (await import('/ui/js/store.js')).apply('modelStatus', rows)",
            rows,
        )

    def test_measured_memory_gpus_a_future_retry_and_an_unknown_state_are_shown(self):
        # A quiet server first: no event of its own replaces the rows fed below.
        self.unload_all()
        # /running's GPUs, as the memory router sends them (the page reads them on each modelStatus).
        gpus = [
            {"id": 0, "memory": 48 * GIB, "reserve": GIB, "used": 40 * GIB, "free": 7 * GIB},
            {"id": 1, "memory": 24 * GIB, "reserve": GIB, "used": 20 * GIB, "free": 3 * GIB},
        ]
        self.page.route(
            re.compile(r"/running$"),
            lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps({"running": [], "gpus": gpus})),
        )
        self.open("models")
        for model in MODELS:
            expect(self.card(model.id).locator(".badge")).to_have_text("stopped")
        base = {"kind": "model", "description": "", "unlisted": False, "peerID": "", "aliases": [], "waiting": 0, "in_flight": 0}
        retry = int(time.time() * 1000) + 3_600_000
        self.feed(
            [
                {
                    **base,
                    "id": "big",
                    "name": "Big",
                    "state": "ready",
                    "gpus": [{"id": 0, "used": 40 * GIB, "free": 7 * GIB}, {"id": 1, "used": 20 * GIB, "free": 3 * GIB}],
                    "memory": 20 * GIB,
                    "memory_measured": 38 * GIB,
                },
                {
                    **base,
                    "id": "broken",
                    "name": "Broken",
                    "state": "failed",
                    "failure": {
                        "reason": "upstream exited during start: exit status: 1",
                        "last_output": "line one\nout of memory",
                        "failures": 5,
                        "window_s": 300,
                        "failed_at_ms": retry - 300_000,
                        "retry_at_ms": retry,
                    },
                },
                {**base, "id": "odd", "name": "Odd", "state": "hibernating"},
            ]
        )
        big = self.card("big")
        expect(big.locator(".placement-memory")).to_have_text("20.0 GB on each of GPUs 0, 1 · measured 38.0 GB in all")
        expect(big.locator('.gpu-line[data-gpu="1"]')).to_contain_text("20.0 GB used · 3.00 GB free")
        expect(self.page.locator('#gpus [data-gpu="0"]')).to_contain_text("40.0 GB used · 7.00 GB free of 48.0 GB")
        expect(self.page.locator('#gpus [data-gpu="1"]')).to_contain_text("big (ready)")
        broken = self.card("broken")
        expect(broken.locator(".badge")).to_have_text("failed")
        failure = broken.get_by_role("group", name="Why broken failed")
        expect(failure.locator(".failure-reason")).to_have_text("upstream exited during start: exit status: 1")
        expect(failure).to_contain_text("5 failures within 5 min 00 s")
        clock = self.page.evaluate(
            "(ms) => new Date(ms).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'})", retry
        )
        expect(failure).to_contain_text(f"A new request starts it again from {clock}; Load retries it now.")
        expect(failure.locator("pre")).to_have_text("line one\nout of memory")
        expect(broken.get_by_role("button", name="Load broken", exact=True)).not_to_have_attribute("aria-disabled", "true")
        # A state this page does not know is shown as the server names it.
        expect(self.card("odd").locator(".badge")).to_have_text("hibernating")
