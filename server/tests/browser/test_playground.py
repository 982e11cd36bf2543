"""The Playground's tabs against mockswap upstreams: Chat (streaming,
markdown, code copy, system prompt, temperature, images, reasoning,
priority), Images, Speech, Transcription, Rerank and the Load test."""

from __future__ import annotations

import base64
import json
import re

from harness import TIMEOUT_MS
from uitest import Model, Server, UiTest, expect

# The smallest PNG there is: one transparent pixel.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def last_request(test: UiTest, model: str, path: str) -> dict:
    requests = test.server.mock(model, "GET", "/__mockswap/requests")
    requests = requests.get("requests", requests) if isinstance(requests, dict) else requests
    mine = [r for r in requests if r["path"] == path]
    test.assertTrue(mine, f"{model} received no {path}")
    return mine[-1]


def newest_activity(test: UiTest, model: str) -> dict:
    """The newest finished request of `model` in the server's history."""
    rows = test.server.json("GET", f"/api/activity?model={model}&limit=1")["activity"]
    test.assertTrue(rows, f"no finished request of {model}")
    return rows[-1]


def header(request: dict, name: str) -> str | None:
    for h in request["headers"]:
        if h["name"] == name:
            return h["value"]
    return None


class Chat(UiTest):
    def test_an_answer_streams_in_after_the_loading_frames(self):
        self.unload_all()
        page = self.open("playground/chat")
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
        self.assertEqual(newest_activity(self, "gamma")["requested_priority"], 10)
        sent = last_request(self, "gamma", "/v1/chat/completions")
        self.assertRegex(header(sent, "x-session-id") or "", r"^lspg-[a-z0-9]{5}$")

    def test_ctrl_enter_sends_a_message_to_an_alias(self):
        page = self.open("playground/chat")
        page.select_option("#pg-model", "b")
        page.fill("#pg-prompt", "via the alias")
        page.press("#pg-prompt", "Control+Enter")
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        expect(answer.locator(".content")).to_have_text(re.compile(r"^\[b(eta)?\] via the alias\s*$"))
        expect(page.locator(".message.user").last).to_have_text(re.compile("via the alias"))
        # Normal sends no priority header.
        self.assertEqual(newest_activity(self, "beta")["requested_priority"], 0)

    def test_markdown_is_rendered_and_a_code_block_can_be_copied(self):
        self.server.json("POST", "/api/models/load/beta")
        markdown = "# Plan\n\nSome **bold** text and `inline` code.\n\n```python\nprint('hi')\n```\n\n<img src=x onerror=alert(1)> and ![far](http://example.com/a.png)"
        self.server.mock("beta", "POST", "/__mockswap/replies", {"match": {"model": "beta"}, "times": 1, "reply": {"content": markdown}})
        page = self.open("playground/chat")
        page.select_option("#pg-model", "beta")
        page.fill("#pg-prompt", "markdown please")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        content = answer.locator(".content")
        expect(content.locator("h1")).to_have_text("Plan")
        expect(content.locator("strong")).to_have_text("bold")
        expect(content.locator("pre code")).to_have_text("print('hi')\n")
        # The model's own HTML is text; an image from elsewhere is a link, not loaded.
        expect(content).to_contain_text("<img src=x onerror=alert(1)>")
        expect(content.locator("[onerror]")).to_have_count(0)
        expect(content.locator("img")).to_have_count(0)
        expect(content.get_by_role("link", name="far")).to_have_attribute("href", "http://example.com/a.png")
        content.get_by_role("button", name="Copy python block").click()
        expect(content.get_by_role("button", name="Copy python block")).to_have_text("Copied")
        self.assertEqual(page.evaluate("navigator.clipboard.readText()"), "print('hi')\n")

    def test_the_system_prompt_temperature_and_an_image_go_with_the_message(self):
        self.server.json("POST", "/api/models/load/gamma")
        page = self.open("playground/chat")
        page.get_by_text("System prompt and sampling").click()
        page.fill("#pg-system", "Answer like a pirate.")
        page.fill("#pg-temperature", "0.3")
        page.select_option("#pg-model", "gamma")
        page.select_option("#pg-priority", "Low")
        page.locator("#pg-images").set_input_files(files=[{"name": "dot.png", "mimeType": "image/png", "buffer": PIXEL}])
        expect(page.locator("#pg-attachments img")).to_have_count(1)
        page.fill("#pg-prompt", "what is in the picture")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".message.assistant").last).to_have_attribute("data-done", "true")
        expect(page.locator(".message.user").last.locator("img")).to_have_count(1)
        expect(page.locator("#pg-attachments img")).to_have_count(0)
        sent = last_request(self, "gamma", "/v1/chat/completions")
        body = sent["json"]
        self.assertEqual(body["messages"][0], {"role": "system", "content": "Answer like a pirate."})
        self.assertEqual(body["temperature"], 0.3)
        user = body["messages"][-1]
        self.assertEqual(user["content"][0], {"type": "text", "text": "what is in the picture"})
        self.assertTrue(user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,"))
        self.assertEqual(newest_activity(self, "gamma")["requested_priority"], -10)

    def test_the_reasoning_is_shown_apart_from_the_answer(self):
        self.server.json("POST", "/api/models/load/beta")
        frames = [
            json.dumps({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think about queues."}}]}),
            json.dumps({"choices": [{"index": 0, "delta": {"content": "Elevated goes first."}}]}),
            "[DONE]",
        ]
        self.server.mock("beta", "POST", "/__mockswap/replies", {"match": {"stream": True}, "times": 1, "reply": {"frames": frames}})
        page = self.open("playground/chat")
        page.select_option("#pg-model", "beta")
        page.fill("#pg-prompt", "think first")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        expect(answer.locator(".content")).to_have_text("Elevated goes first.")
        reasoning = answer.locator("details.reasoning")
        expect(reasoning.locator("summary")).to_have_text("Reasoning")
        expect(reasoning).to_contain_text("Let me think about queues.")


class ChatErrors(UiTest):
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
        page = self.open("playground/chat")
        page.select_option("#pg-model", "gamma")
        page.fill("#pg-prompt", "this fails")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-done", "true")
        expect(answer.get_by_role("alert")).to_contain_text("out of memory")
        self.server.mock("gamma", "DELETE", "/__mockswap/faults")
class Media(UiTest):
    def test_images_are_generated_and_shown(self):
        page = self.open("playground/images")
        page.select_option("#img-model", "studio")
        page.select_option("#img-size", "256x256")
        page.fill("#img-n", "2")
        page.fill("#img-prompt", "a lighthouse")
        page.get_by_role("button", name="Generate").click()
        images = page.locator("#img-results img")
        expect(images).to_have_count(2)
        expect(images.first).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
        self.assertGreater(images.first.evaluate("img => img.naturalWidth"), 0)
        body = last_request(self, "studio", "/v1/images/generations")["json"]
        self.assertEqual((body["prompt"], body["n"], body["size"]), ("a lighthouse", 2, "256x256"))

    def test_speech_lists_the_voices_and_plays_the_answer(self):
        page = self.open("playground/speech")
        page.select_option("#tts-model", "studio")
        voices = page.locator("#tts-voice option")
        expect(page.locator("#tts-voice-note")).to_contain_text("voices from studio")
        self.assertGreater(voices.count(), 1)
        page.select_option("#tts-voice", index=1)
        voice = page.locator("#tts-voice").input_value()
        page.select_option("#tts-format", "wav")
        page.fill("#tts-input", "Elevated requests go first.")
        page.get_by_role("button", name="Speak").click()
        audio = page.locator("#tts-audio")
        expect(audio).to_have_attribute("src", re.compile(r"^blob:"))
        page.wait_for_function("() => document.getElementById('tts-audio').readyState >= 1 && document.getElementById('tts-audio').duration > 0")
        body = last_request(self, "studio", "/v1/audio/speech")["json"]
        self.assertEqual((body["input"], body["voice"]), ("Elevated requests go first.", voice))

    def test_an_uploaded_recording_is_transcribed(self):
        page = self.open("playground/transcription")
        page.select_option("#stt-model", "studio")
        page.locator("#stt-file").set_input_files(files=[{"name": "note.wav", "mimeType": "audio/wav", "buffer": b"RIFF" + bytes(40)}])
        page.fill("#stt-language", "en")
        page.get_by_role("button", name="Transcribe").click()
        result = page.locator("#stt-result")
        expect(result).to_be_visible()
        expect(result.locator(".transcript-text")).to_contain_text("note.wav")
        sent = last_request(self, "studio", "/v1/audio/transcriptions")
        self.assertIn("multipart/form-data", header(sent, "content-type"))
        self.assertEqual(sent["model"], "studio")

    def test_rerank_orders_the_documents_by_relevance(self):
        page = self.open("playground/rerank")
        page.select_option("#rr-model", "studio")
        page.fill("#rr-query", "bread flour")
        page.fill("#rr-documents", "queues and priorities\nbread needs flour and water\nflour only")
        page.get_by_role("button", name="Rerank").click()
        results = page.locator("#rr-results li")
        expect(results).to_have_count(3)
        expect(results.nth(0)).to_contain_text("bread needs flour and water")
        expect(results.nth(2)).to_contain_text("queues and priorities")
        scores = results.evaluate_all("els => els.map(e => Number(e.querySelector('meter').value))")
        self.assertEqual(scores, sorted(scores, reverse=True))


class LoadTest(UiTest):
    """A model with one slot on a server of its own: everything the load test
    sends must queue, and the queue serves Elevated before Low."""

    @classmethod
    def setUpClass(cls):
        cls.own = Server(
            [
                Model("solo", "Solo (one slot)", "One request at a time", ["--gate-closed"], yaml=["parallel: 1"]),
                Model("other", "Other", "Not chosen", []),
            ]
        ).start()

    @classmethod
    def tearDownClass(cls):
        cls.own.stop()

    @property
    def server(self) -> Server:
        return self.own

    def test_elevated_requests_finish_ahead_of_low_ones(self):
        page = self.open("playground/load-test")
        # One request holds the only slot, so all of the test's requests wait.
        self.server.json("POST", "/api/models/load/solo")
        self.close_gate("solo")
        held = self.server.in_background(self.server.chat, "solo", "holds the slot", None)
        self.server.mock("solo", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        page.fill("#lt-elevated", "3")
        page.fill("#lt-normal", "0")
        page.fill("#lt-low", "3")
        expect(page.locator("#lt-total")).to_have_text("6")
        page.get_by_role("group", name=re.compile("Models")).get_by_label("solo").check()
        page.select_option("#lt-order", "low-first")
        page.fill("#lt-max-tokens", "8")
        page.get_by_role("button", name="Start").click()
        # All six queue behind the held one (the Low ones arrived first).
        expect(page.locator('#lt-summary tr[data-tier="Elevated"] td[data-key="waiting"]')).to_have_text("3")
        page.wait_for_function("async () => (await (await fetch('/api/queue')).json()).queue.length === 6")
        self.server.mock("solo", "POST", "/__mockswap/gate", {"open": True})
        self.assertEqual(held.result()[0], 200)
        expect(page.locator("#lt-progress")).to_contain_text("6 of 6 finished · run over")
        ranks = {
            tier: [int(r) for r in page.locator(f'tr.lt-request[data-tier="{tier}"]').evaluate_all("els => els.map(e => e.dataset.rank)")]
            for tier in ("Elevated", "Low")
        }
        self.assertLess(max(ranks["Elevated"]), min(ranks["Low"]), ranks)
        expect(page.locator('#lt-summary tr[data-tier="Elevated"] td[data-key="done"]')).to_have_text("3")
        expect(page.locator('#lt-summary tr[data-tier="Low"] td[data-key="p50"]')).not_to_have_text("–")
        expect(page.locator("#lt-timeline svg g.lt-bar")).to_have_count(6)
        self.assertEqual(
            {r["model"] for r in self.server.json("GET", "/api/activity?limit=50")["activity"]}, {"solo"}
        )

    def test_stop_withdraws_the_requests_still_waiting(self):
        page = self.open("playground/load-test")
        self.server.json("POST", "/api/models/load/solo")
        self.close_gate("solo")
        held = self.server.in_background(self.server.chat, "solo", "holds the slot", None)
        self.server.mock("solo", "GET", "/__mockswap/gate?wait_held=1&timeout_ms=30000")
        page.fill("#lt-elevated", "2")
        page.fill("#lt-normal", "2")
        page.fill("#lt-low", "2")
        page.get_by_role("group", name=re.compile("Models")).get_by_label("solo").check()
        page.get_by_role("button", name="Start").click()
        page.wait_for_function("async () => (await (await fetch('/api/queue')).json()).queue.length === 6")
        page.get_by_role("button", name="Stop").click()
        expect(page.locator("#lt-progress")).to_contain_text("6 of 6 finished · run over")
        expect(page.locator('tr.lt-request[data-status="stopped"]')).to_have_count(6)
        page.wait_for_function("async () => (await (await fetch('/api/queue')).json()).queue.length === 0")
        self.server.mock("solo", "POST", "/__mockswap/gate", {"open": True})
        self.assertEqual(held.result()[0], 200)
