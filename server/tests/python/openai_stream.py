"""Streams one chat completion through the server with the official `openai`
package, the way an application would, and reports what it saw.

Usage: openai_stream.py BASE_URL MODEL

Prints one JSON object per line, flushed at once so the test can act while the
stream is still open:
  {"chunk": {"content": ..., "reasoning": ..., "llamaswap": {...} or null}}
  {"usage": true, "llamaswap": ...}               a usage-only chunk without choices
  {"api_error": {"message": ..., "body": ...}}   the client raised openai.APIError
  {"done": true}                                 the loop ended normally
Any other exception escapes: the traceback goes to stderr and the exit status
is not 0.
"""

import json
import sys

import openai


def report(obj):
    print(json.dumps(obj), flush=True)


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
    )
    try:
        # The loop every OpenAI streaming example uses, with the usual guard
        # for an upstream's closing usage-only chunk (`choices: []`).
        for chunk in stream:
            extra = chunk.model_extra or {}
            if not chunk.choices and chunk.usage is not None:
                report({"usage": True, "llamaswap": extra.get("llamaswap")})
                continue
            delta = chunk.choices[0].delta
            report(
                {
                    "chunk": {
                        "content": delta.content,
                        "reasoning": getattr(delta, "reasoning_content", None),
                        "llamaswap": extra.get("llamaswap"),
                    }
                }
            )
    except openai.APIError as error:
        report({"api_error": {"class": type(error).__name__, "message": error.message, "body": error.body}})
        return
    report({"done": True})


if __name__ == "__main__":
    main()
