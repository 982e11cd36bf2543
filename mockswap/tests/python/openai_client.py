"""Reads mockswap's answers with the official `openai` package, the way an
application would, and prints what it saw as one JSON object.

Usage: openai_client.py BASE_URL

Runs four calls against BASE_URL/v1:
  "loading":   a streamed chat whose stream opens with the proxy's loading frames
  "tool_stream": a streamed chat answered with two tool calls
  "tool_whole":  the same, not streamed (message.tool_calls)
  "error":     a chat answered with a scripted 429 (the client raises)
Any unexpected exception escapes: the traceback goes to stderr, exit status 1.
"""

import json
import sys

import openai


def main():
    base_url = sys.argv[1]
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    out = {}

    stream = client.chat.completions.create(
        model="loading", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    statuses, reasoning, content = [], "", ""
    for chunk in stream:
        extra = chunk.model_extra or {}
        if extra.get("llamaswap"):
            statuses.append(extra["llamaswap"]["status"])
        delta = chunk.choices[0].delta
        reasoning += getattr(delta, "reasoning_content", None) or ""
        content += delta.content or ""
    out["loading"] = {"statuses": statuses, "reasoning": reasoning, "content": content}

    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    stream = client.chat.completions.create(
        model="tools", messages=[{"role": "user", "content": "time?"}], tools=tools, stream=True
    )
    calls, finish, deltas = {}, None, 0
    for chunk in stream:
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for call in choice.delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
            if call.id:
                entry["id"] = call.id
            if call.function and call.function.name:
                entry["name"] = call.function.name
            if call.function and call.function.arguments:
                entry["arguments"] += call.function.arguments
                deltas += 1
    out["tool_stream"] = {
        "finish": finish,
        "argument_deltas": deltas,
        "calls": [
            {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])}
            for _, c in sorted(calls.items())
        ],
    }

    whole = client.chat.completions.create(
        model="tools", messages=[{"role": "user", "content": "time?"}], tools=tools
    )
    message = whole.choices[0].message
    out["tool_whole"] = {
        "finish": whole.choices[0].finish_reason,
        "content": message.content,
        "calls": [
            {"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)}
            for c in message.tool_calls
        ],
    }

    try:
        client.chat.completions.create(model="busy", messages=[{"role": "user", "content": "x"}])
        out["error"] = None
    except openai.RateLimitError as error:
        out["error"] = {"status": error.status_code, "code": error.code, "message": error.body["message"]}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
