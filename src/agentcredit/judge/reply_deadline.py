"""A judge request bounded as a whole, not per read.

    value = call_before(seconds, lambda: client.chat.completions.create(...))   # TimeoutError after `seconds`
    OpenAI(..., http_client=deadline_http_client())   # so an abandoned request ends at its deadline too

The HTTP client's timeout bounds each read, not the reply: an endpoint that sends one byte a second
never trips it, and a step with `judge.step_budget_s=20` took 60 s and then used the late reply. So
the request runs in a daemon thread, and the caller waits for it only until the deadline; past it, the
request is abandoned (its reply, should one come, is never read). The thread itself does not hang on:
its HTTP transport stops reading a body once the deadline has passed, at the next chunk.

The same transport bounds the reply in bytes (`judge.max_reply_bytes`): a reply announced larger is
refused before its body is read, and a body that keeps coming is cut at the cap, so an endpoint
cannot fill memory within its time budget (a reply that never ended reached 1.5 GB in 3 s). A
redirect to another origin is refused (httpx's response hook, before it is followed): the verdict
must come from the endpoint the run was configured with.
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Callable, Iterator, TypeVar

from agentcredit.judge.base import JudgeError

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


# A judge reply is one short chat completion (a few kB with max_completion_tokens=512); 1 MiB leaves room for
# verbose endpoints and still bounds what a broken or hostile one can make the trainer hold.
DEFAULT_MAX_REPLY_BYTES = 2**20


class JudgeReplyRefused(JudgeError):
    """A reply past `judge.max_reply_bytes`, or a redirect to another origin. A JudgeError, so it passes the
    openai client unchanged (it retries only transport errors) and the group keeps GRPO credit."""


def origin(url) -> tuple[str, str, int | None]:
    """(scheme, host, port) of an httpx URL: what must stay the same for a redirect to be followed."""
    return url.scheme, url.host, url.port


def refuse_other_origin(response) -> None:
    """httpx response hook: a redirect whose target has another origin than the request raises, before
    httpx follows it; a redirect within the endpoint's origin (e.g. a trailing slash) is followed."""
    if not response.has_redirect_location:
        return
    target = response.request.url.join(response.headers["Location"])
    if origin(target) != origin(response.request.url):
        raise JudgeReplyRefused(f"the judge endpoint redirected to another origin ({target.scheme}://{target.host}"
                                f"{'' if target.port is None else f':{target.port}'}); refused: the verdict must "
                                "come from judge.base_url itself")


def too_large(size: int, cap: int) -> JudgeReplyRefused:
    return JudgeReplyRefused(f"the judge endpoint's reply is larger than judge.max_reply_bytes={cap} "
                             f"({size} bytes or more); cut, not used")


def deadline_http_client(max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
    """The openai client's default httpx client (its limits, same-origin redirects) over a transport that
    stops reading a response body once the deadline `call_before` set for this thread has passed, or
    once `max_reply_bytes` have come."""
    from openai import DefaultHttpxClient

    httpx = _http_module()

    class BodyBeforeDeadline(httpx.SyncByteStream):
        def __init__(self, stream, deadline: float | None, request):
            self.stream, self.deadline, self.request = stream, deadline, request

        def __iter__(self) -> Iterator[bytes]:
            received = 0
            for chunk in self.stream:
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise httpx.ReadTimeout("the reply was not complete by its deadline", request=self.request)
                received += len(chunk)
                if received > max_reply_bytes:  # counted as it streams: a reply that never ends stops here
                    raise too_large(received, max_reply_bytes)
                yield chunk

        def close(self) -> None:
            self.stream.close()

    class DeadlineTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request):
            response = self.inner.handle_request(request)
            announced = response.headers.get("Content-Length", "")
            # Refused before its body is read; a length of many digits is never parsed (int() of 5,000 digits raises).
            if announced.isascii() and announced.isdigit() and (len(announced) > 18 or int(announced) > max_reply_bytes):
                response.close()
                raise too_large(int(announced) if len(announced) <= 18 else 10**18, max_reply_bytes)
            if response.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
                # Asked for identity (below): a compressed body would be capped before decoding, and a small
                # gzip body can decode to gigabytes.
                response.close()
                raise JudgeReplyRefused("the judge endpoint compressed its reply although asked not to "
                                        f"(Content-Encoding: {response.headers['Content-Encoding'][:40]}); not used")
            deadline = getattr(_thread, "deadline", None)
            return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                  stream=BodyBeforeDeadline(response.stream, deadline, request), request=request)

        def close(self) -> None:
            self.inner.close()

    return DefaultHttpxClient(transport=DeadlineTransport(), headers={"Accept-Encoding": "identity"},
                              event_hooks={"response": [refuse_other_origin]})
