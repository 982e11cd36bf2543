"""Takes the screenshots of docs/ui/ (run.py --screenshots DIR).

A server with four fake models like scripts/demo's; one request is held at
llama-8b's gate while others queue behind it, so every view has something to
show. Waits, as in the tests, on the page and on mockswap's admin API.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from harness import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, Model, Server

expect.set_options(timeout=TIMEOUT_MS)

MODELS = [
    Model("embed-small", "Embeddings", "Small embedding model", ["--load-time", "300ms"]),
    Model("llama-8b", "Llama 8B", "General chat model", ["--gate-closed", "--load-time", "500ms"], ["chat"]),
    Model("mistral-7b", "Mistral 7B", "Another chat model", ["--load-time", "500ms", "--tokens-per-second", "30"]),
    Model("qwen-14b", "Qwen 14B", "Bigger chat model", ["--load-time", "800ms", "--tokens-per-second", "20"], ["big"]),
]


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    server = Server(MODELS).start()
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


def take(browser, server: Server, out: Path):
    desktop = browser.new_context(viewport={"width": 1280, "height": 760}, color_scheme="light")
    page = desktop.new_page()

    # Some history first, so Activity and Logs are not empty.
    server.json("POST", "/api/models/load/embed-small")
    for text, priority in [("warm up", None), ("a quick question", "10"), ("batch item 1", "-10")]:
        assert server.chat("mistral-7b", text, priority)[0] == 200
    server.request(
        "POST",
        "/v1/embeddings",
        body={"model": "embed-small", "input": ["hello", "world"]},
    )

    # A request held at llama-8b's gate, and work queued behind it.
    held = server.in_background(server.chat, "llama-8b", "a long generation", None)
    live(page, server, "queue")
    expect(page.locator('#running article[data-model="llama-8b"] li')).to_have_count(1)
    waiting = []
    for model, text, priority in [
        ("qwen-14b", "nightly batch", "-10"),
        ("qwen-14b", "nightly batch 2", "-10"),
        ("mistral-7b", "summarise this", None),
        ("qwen-14b", "a person is typing", "10"),
    ]:
        waiting.append(server.in_background(server.chat, model, text, priority))
        expect(page.locator("tr.queue-row")).to_have_count(len(waiting))
    page.wait_for_timeout(1200)  # let the waited times tick, for the picture only
    page.screenshot(path=out / "queue.png")

    live(page, server, "models")
    expect(page.locator('article.model[data-model="llama-8b"] .badge')).to_have_text("ready")
    page.screenshot(path=out / "models.png")

    dark = browser.new_context(viewport={"width": 1280, "height": 760}, color_scheme="dark")
    dark_page = dark.new_page()
    live(dark_page, server, "queue")
    expect(dark_page.locator("tr.queue-row")).to_have_count(len(waiting))
    dark_page.screenshot(path=out / "queue-dark.png")
    dark.close()

    phone = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="light")
    phone_page = phone.new_page()
    live(phone_page, server, "queue")
    expect(phone_page.locator("tr.queue-row")).to_have_count(len(waiting))
    phone_page.screenshot(path=out / "queue-phone.png")
    phone.close()

    server.mock("llama-8b", "POST", "/__mockswap/gate", {"open": True})
    for call in [held, *waiting]:
        assert call.result()[0] == 200

    live(page, server, "activity")
    expect(page.locator("tr.activity-row")).to_have_count(9)
    page.screenshot(path=out / "activity.png")

    live(page, server, "logs")
    expect(page.locator('.log-line[data-model="qwen-14b"]').first).to_be_visible()
    page.screenshot(path=out / "logs.png")

    live(page, server, "playground")
    page.select_option("#pg-model", "mistral-7b")
    page.select_option("#pg-priority", "Elevated")
    page.fill("#pg-prompt", "What does priority change?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".message.assistant").last).to_have_attribute("data-done", "true")
    page.fill("#pg-prompt", "Only which waiting request goes next?")
    page.screenshot(path=out / "playground.png")
    desktop.close()
