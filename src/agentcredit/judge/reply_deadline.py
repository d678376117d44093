"""A judge request bounded as a whole, not per read.

    value = call_before(seconds, lambda: client.chat.completions.create(...))   # TimeoutError after `seconds`
    OpenAI(..., http_client=deadline_http_client())   # so an abandoned request ends at its deadline too

The HTTP client's timeout bounds each read, not the reply: an endpoint that sends one byte a second
never trips it, and a step with `judge.step_budget_s=20` took 60 s and then used the late reply. So
the request runs in a daemon thread, and the caller waits for it only until the deadline; past it, the
request is abandoned (its reply, should one come, is never read). The thread itself does not hang on:
its HTTP transport stops reading a body once the deadline has passed, at the next chunk.
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")
_thread = threading.local()  # the deadline of the request this thread is making (time.monotonic())


def call_before(seconds: float, call: Callable[[], T]) -> T:
    """`call()`'s result or exception, or TimeoutError once `seconds` have passed without one."""
    deadline = time.monotonic() + seconds
    outcome: dict = {}
    done = threading.Event()

    def run() -> None:
        _thread.deadline = deadline
        try:
            outcome["value"] = call()
        except BaseException as err:  # noqa: BLE001 -- handed to the caller as it is
            outcome["error"] = err
        finally:
            done.set()

    threading.Thread(target=run, name="judge-request", daemon=True).start()
    # A timed wait may wake a hair early; the deadline must have passed on the clock the budget reads.
    while not done.wait(max(0.0, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no complete reply within {seconds:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _http_module():
    """The httpx package the openai client is built on (httpx before openai 3, httpx2 from it)."""
    from openai import DefaultHttpxClient

    return importlib.import_module(DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


def deadline_http_client():
    """The openai client's default httpx client (its limits and redirects) over a transport that stops
    reading a response body once the deadline `call_before` set for this thread has passed."""
    from openai import DefaultHttpxClient

    httpx = _http_module()

    class BodyBeforeDeadline(httpx.SyncByteStream):
        def __init__(self, stream, deadline: float, request):
            self.stream, self.deadline, self.request = stream, deadline, request

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.stream:
                if time.monotonic() > self.deadline:
                    raise httpx.ReadTimeout("the reply was not complete by its deadline", request=self.request)
                yield chunk

        def close(self) -> None:
            self.stream.close()

    class DeadlineTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request):
            response = self.inner.handle_request(request)
            deadline = getattr(_thread, "deadline", None)
            if deadline is None:
                return response
            return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                  stream=BodyBeforeDeadline(response.stream, deadline, request), request=request)

        def close(self) -> None:
            self.inner.close()

    return DefaultHttpxClient(transport=DeadlineTransport())
