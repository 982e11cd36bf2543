"""Takes the screenshots of docs/ui/ (run.py --screenshots DIR).

A server with fake models like scripts/demo's, placed by the memory router on
one GPU, with named API keys: some history first (a model that fails to start,
one put to sleep to make room), then one request held at llama-8b's gate while
others queue behind it, so every view has something to show. Waits, as in the tests, on the page and on mockswap's
admin API; the few pauses are for the picture only (live timers ticking).
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, Model, Server

expect.set_options(timeout=TIMEOUT_MS)

MODELS = [
    Model("embed-small", "Embeddings", "Small embedding model", ["--load-time", "300ms"], yaml=["memory: 1GiB"]),
    Model(
        "llama-8b",
        "Llama 8B",
        "General chat model",
        ["--gate-closed", "--load-time", "500ms"],
        ["chat"],
        yaml=["capabilities: {in: [text, image], out: [text], tools: true, context: 131072}", "memory: 9GiB"],
    ),
    Model(
        "mistral-7b",
        "Mistral 7B",
        "Another chat model",
        ["--load-time", "500ms", "--tokens-per-second", "40"],
        yaml=[
            "capabilities: {in: [text], out: [text], tools: true, context: 32768}",
            "metadata: {family: mistral, quant: Q5_K_M}",
            "memory: 15GiB",
            'sleep: {sleep: "POST /sleep?level=1", wake: "POST /wake_up", memory: 1GiB}',
        ],
        shell_before='printf "\\033[32mload_tensors:\\033[0m offloaded 33/33 layers to GPU\\n\\033[33mwarning:\\033[0m flash attention off\\n" >&2',
    ),
    Model(
        "qwen-14b",
        "Qwen 14B",
        "Bigger chat model, one request at a time",
        ["--load-time", "800ms", "--tokens-per-second", "60"],
        ["big"],
        yaml=["parallel: 1", "concurrencyLimit: 32", "capabilities: {in: [text], out: [text], context: 32768}", "memory: 16GiB"],
    ),
    Model(
        "studio",
        "Studio",
        "Images, speech, transcription and rerank",
        [],
        yaml=["capabilities: {in: [text, audio, image], out: [text, audio, image], reranker: true}", "memory: 6GiB"],
    ),
    # Its start fails (its weights are missing); failed after one failure.
    Model(
        "vision-34b",
        "Vision 34B",
        "Weights not downloaded yet",
        [],
        yaml=["memory: 20GiB", "maxRestarts: 1", "restartWindow: 600"],
        shell_before='echo "llama_model_load: error loading model: failed to open vision-34b.gguf: No such file or directory" >&2; exit 1',
    ),
]

# One 24 GiB GPU: llama-8b and qwen-14b do not fit together, and mistral-7b
# sleeps (keeping 1 GiB) rather than stops when it must make room.
EXTRA = """routing:
  router:
    use: memory
    settings:
      memory:
        gpus: [{id: 0, memory: 24GiB}]
        reserve: 1GiB
keys:
  - {key: sk-demo-admin, name: admin, admin: true}
  - {key: sk-demo-bot, name: bot}
  - {key: sk-demo-batch, name: batch}
"""
KEYS = ["sk-demo-admin", "sk-demo-bot", "sk-demo-batch"]

SHOTS = {"width": 1280, "height": 800}


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    server = Server(MODELS, api_keys=KEYS, extra_yaml=EXTRA).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            take(browser, server, out)
            browser.close()
    finally:
        server.stop()
    for path in sorted(out.glob("*.png")):
        print(path)
    return 0


def live(page, server, view):
    page.goto(f"{server.url}/ui/{view}")
    expect(page.locator("#connection")).to_have_text("Live")


def chat_as(server: Server, key: str, model: str, text: str, priority: str | None):
    headers = {"Authorization": f"Bearer {key}"}
    if priority is not None:
        headers["X-Priority"] = priority
    return server.request(
        "POST",
        "/v1/chat/completions",
        body={"model": model, "messages": [{"role": "user", "content": text}]},
        headers=headers,
    )


def context(browser, **options):
    """A browser context whose page has the admin key (kept as the page keeps it)."""
    ctx = browser.new_context(**options)
    ctx.add_init_script(f"localStorage.setItem('llamaswap.apiKey', {KEYS[0]!r})")
    return ctx


def shot(page, out: Path, name: str, full=False):
    page.screenshot(path=out / f"{name}.png", full_page=full)


def take(browser, server: Server, out: Path):
    desktop = context(browser, viewport=SHOTS, color_scheme="light")
    page = desktop.new_page()

    # Some history first, so Activity and Logs are not empty.
    assert chat_as(server, KEYS[1], "vision-34b", "describe this", None)[0] >= 500
    server.json("POST", "/api/models/load/embed-small")
    for key, text, priority in [
        (KEYS[1], "warm up", None),
        (KEYS[1], "a quick question", "10"),
        (KEYS[2], "batch item 1", "-10"),
        (KEYS[2], "batch item 2", "-10"),
    ]:
        assert chat_as(server, key, "mistral-7b", text, priority)[0] == 200
    server.request("POST", "/v1/embeddings", body={"model": "embed-small", "input": ["hello", "world"]})
    server.request(
        "POST",
        "/v1/chat/completions",
        body={"model": "qwen-14b", "stream": True, "messages": [{"role": "user", "content": "Explain priority queues."}]},
        headers={"Authorization": f"Bearer {KEYS[2]}", "X-Session-ID": "agent-7"},
    )

    # A request held at llama-8b's gate, and work queued behind it.
    held = server.in_background(chat_as, server, KEYS[1], "llama-8b", "a long generation", None)
    live(page, server, "queue")
    expect(page.locator('#running tr.running-row[data-model="llama-8b"]')).to_have_count(1)
    waiting = []
    for key, model, text, priority in [
        (KEYS[2], "qwen-14b", "nightly batch", "-10"),
        (KEYS[2], "qwen-14b", "nightly batch 2", "-10"),
        (KEYS[1], "mistral-7b", "summarise this", None),
        (KEYS[1], "qwen-14b", "a person is typing", "10"),
    ]:
        waiting.append(server.in_background(chat_as, server, key, model, text, priority))
        expect(page.locator("tr.queue-row")).to_have_count(len(waiting))
    page.wait_for_timeout(1200)  # let the waited times tick, for the picture only
    shot(page, out, "queue")

    live(page, server, "models")
    expect(page.locator('article.model[data-model="llama-8b"] .badge')).to_have_text("ready")
    expect(page.locator('article.model[data-model="mistral-7b"] .badge')).to_have_text("sleeping")
    expect(page.locator('article.model[data-model="vision-34b"] .badge')).to_have_text("failed")
    expect(page.locator('#gpus [data-gpu="0"]')).to_be_visible()
    page.locator('article.model[data-model="mistral-7b"]').get_by_text("Metadata").click()
    page.get_by_role("button", name="Pin llama-8b").click()
    shot(page, out, "models")

    dark = context(browser, viewport=SHOTS, color_scheme="dark")
    dark_page = dark.new_page()
    live(dark_page, server, "queue")
    expect(dark_page.locator("tr.queue-row")).to_have_count(len(waiting))
    shot(dark_page, out, "queue-dark")
    dark.close()

    phone = context(browser, viewport={"width": 390, "height": 844}, color_scheme="light")
    phone_page = phone.new_page()
    live(phone_page, server, "queue")
    expect(phone_page.locator("tr.queue-row")).to_have_count(len(waiting))
    shot(phone_page, out, "queue-phone")
    live(phone_page, server, "models")
    expect(phone_page.locator('article.model[data-model="mistral-7b"] .badge')).to_have_text("sleeping")
    shot(phone_page, out, "models-phone")
    phone.close()

    server.mock("llama-8b", "POST", "/__mockswap/gate", {"open": True})
    for call in [held, *waiting]:
        assert call.result()[0] == 200

    live(page, server, "activity")
    expect(page.locator("tr.activity-row").first).to_be_visible()
    expect(page.locator("#band-histograms .histogram").first).to_be_visible()
    shot(page, out, "activity", full=True)
    page.locator('tr.activity-row[data-model="qwen-14b"]').last.get_by_role("button", name="View").click()
    expect(page.get_by_role("dialog").locator('pre[data-body="response"]')).not_to_be_empty()
    shot(page, out, "capture")
    page.get_by_role("dialog").get_by_role("button", name="Close").click()

    live(page, server, "models/mistral-7b")
    expect(page.locator("tr.activity-row").first).to_be_visible()
    shot(page, out, "model")

    live(page, server, "logs")
    expect(page.locator('#upstream-log .log-line[data-model="qwen-14b"]').first).to_be_visible()
    shot(page, out, "logs")

    live(page, server, "playground/chat")
    server.json("POST", "/api/models/load/mistral-7b")
    server.mock(
        "mistral-7b",
        "POST",
        "/__mockswap/replies",
        {
            "match": {"model": "mistral-7b"},
            "times": 1,
            "reply": {
                "content": "Only **which waiting request goes next**. Running work is never preempted:\n\n"
                "```python\nclient.chat(model, messages, priority=Priority.ELEVATED)\n```\n\n"
                "Effective priority = max(model floor, header)."
            },
        },
    )
    page.select_option("#pg-model", "mistral-7b")
    page.select_option("#pg-priority", "Elevated")
    page.fill("#pg-prompt", "What does priority change?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".message.assistant").last).to_have_attribute("data-done", "true")
    page.fill("#pg-prompt", "And for a batch job?")
    shot(page, out, "playground")

    live(page, server, "playground/images")
    page.select_option("#img-model", "studio")
    page.fill("#img-n", "3")
    page.fill("#img-prompt", "a lighthouse at dusk")
    page.get_by_role("button", name="Generate").click()
    expect(page.locator("#img-results img")).to_have_count(3)
    shot(page, out, "playground-images")

    live(page, server, "playground/speech")
    page.select_option("#tts-model", "studio")
    expect(page.locator("#tts-voice-note")).to_contain_text("voices from studio")
    page.fill("#tts-input", "Elevated requests go first; running work is never cut.")
    page.get_by_role("button", name="Speak").click()
    expect(page.locator("#tts-audio")).to_be_visible()
    shot(page, out, "playground-speech")

    live(page, server, "playground/transcription")
    page.select_option("#stt-model", "studio")
    page.locator("#stt-file").set_input_files(files=[{"name": "standup.wav", "mimeType": "audio/wav", "buffer": b"RIFF" + bytes(2000)}])
    page.get_by_role("button", name="Transcribe").click()
    expect(page.locator("#stt-result")).to_be_visible()
    shot(page, out, "playground-transcription")

    live(page, server, "playground/rerank")
    page.select_option("#rr-model", "studio")
    page.get_by_role("button", name="Rerank").click()
    expect(page.locator("#rr-results li")).to_have_count(3)
    shot(page, out, "playground-rerank")

    live(page, server, "playground/load-test")
    for tier, n in (("elevated", "4"), ("normal", "4"), ("low", "4")):
        page.fill(f"#lt-{tier}", n)
    page.get_by_role("group", name="Models (requests go round-robin)").get_by_label("qwen-14b").check()
    page.fill("#lt-max-tokens", "24")
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#lt-progress")).to_contain_text("run over")
    shot(page, out, "playground-load-test", full=True)

    # A few of the server's samples (one every 5 s), so the charts have lines.
    live(page, server, "performance")
    page.wait_for_function(
        "async () => ((await (await fetch('/api/performance', {headers: {Authorization: "
        "`Bearer ${localStorage.getItem('llamaswap.apiKey')}`}})).json()).sys_stats || []).length >= 3",
        polling=1000,
        timeout=60_000,
    )
    page.get_by_role("button", name="Refresh now").click()
    expect(page.locator('[data-chart="cpu"]')).not_to_have_attribute("data-points", re.compile(r"^[012]$"))
    page.wait_for_timeout(500)
    shot(page, out, "performance", full=True)

    live(page, server, "settings")
    shot(page, out, "settings")
    desktop.close()
