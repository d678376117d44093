"""The openai judge holds at most judge.max_reply_bytes of a reply and never takes a verdict from another
origin (issue 44, item 8): a reply that never ends is cut as it streams, a complete reply past the cap is
refused from its Content-Length, a compressed one is refused, and a redirect to another host or port is
refused before it is followed (a redirect within the endpoint is followed). Each is a judge failure: the
group keeps GRPO credit and training goes on."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentcredit.judge import JudgeError, build_judge, build_judge_context
from agentcredit.judge.verification import make_segment_verifier
from judge_fixtures import QUESTION, FakeWorker, error_traj, expert_traj, failed_traj

VERDICT = {"segment_start_turn": 2, "segment_end_turn": 3, "rationale": "opens the mayor's page"}


def completion(rationale: str = VERDICT["rationale"]) -> bytes:
    message = {"role": "assistant", "content": json.dumps({**VERDICT, "rationale": rationale})}
    return json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class Endpoint:
    """POST …/chat/completions answered by `reply(handler)`; counts requests and the bytes it sent."""

    def __init__(self, reply):
        self.requests: list[str] = []
        self.sent = 0
        self.hung_up = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.requests.append(self.path)
                try:
                    reply(self, endpoint)
                except OSError:  # the client hung up
                    endpoint.hung_up.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def send(self, handler, data: bytes, status: int = 200, **headers) -> None:
        handler.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
        self.sent += len(data)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint():
    made = []

    def start(reply):
        made.append(Endpoint(reply))
        return made[-1]

    yield start
    for e in made:
        e.close()


def judge_at(base_url: str, **options):
    return build_judge({"kind": "openai", "base_url": base_url, "model": "m", "api_key": "k", "timeout_s": 10,
                        "max_retries": 0, **options})


def context():
    return build_judge_context([expert_traj(), failed_traj(), error_traj()], QUESTION.text, chosen=0,
                               max_segment_turns=4, success_threshold=1.0)


def endless(handler, endpoint):
    """A 200 reply without a length whose body never ends (chunked, 64 KiB a chunk)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b'{"x": "' + b"a" * 65536
    while endpoint.sent < 2**31:  # 2 GiB: far past any cap; the client hangs up long before
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        endpoint.sent += len(chunk)


def test_a_reply_that_never_ends_is_cut_at_the_cap_as_it_streams(endpoint):
    server = endpoint(endless)
    judge, question = judge_at(f"{server.origin}/v1", max_reply_bytes=262144, timeout_s=30), context()
    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"larger than judge\.max_reply_bytes=262144"):
        judge.propose(question)
    assert time.monotonic() - t0 < 10  # cut at the cap, not at the 30 s timeout (a busy machine takes a few s)
    assert server.hung_up.wait(5)
    # What the server managed to push before the client hung up: the cap plus what sat in the socket buffers.
    assert server.sent < 64 * 2**20, server.sent


def test_a_complete_reply_past_the_cap_is_refused_before_its_body_is_read(endpoint):
    big = completion("x" * (2 * 2**20))  # a valid verdict in a 2 MiB reply (the default cap is 1 MiB)
    server = endpoint(lambda h, e: e.send(h, big))
    with pytest.raises(JudgeError, match=r"larger than judge\.max_reply_bytes=1048576 \(2097\d{3} bytes"):
        judge_at(f"{server.origin}/v1").propose(context())
    small = endpoint(lambda h, e: e.send(h, completion()))
    proposal = judge_at(f"{small.origin}/v1").propose(context())  # a normal reply still goes through
    assert (proposal.start, proposal.end) == (2, 3)


def test_a_compressed_reply_is_refused(endpoint):
    bomb = gzip.compress(b" " * (64 * 2**20))  # 64 KiB on the wire, 64 MiB once decoded
    server = endpoint(lambda h, e: e.send(h, bomb, **{"Content-Encoding": "gzip"}))
    with pytest.raises(JudgeError, match=r"compressed its reply although asked not to \(Content-Encoding: gzip\)"):
        judge_at(f"{server.origin}/v1").propose(context())


def test_a_redirect_to_another_origin_is_refused_and_never_followed(endpoint):
    other = endpoint(lambda h, e: e.send(h, completion("a verdict from elsewhere")))
    redirecting = endpoint(lambda h, e: e.send(h, b"", status=307, Location=f"{other.origin}/v1/chat/completions"))
    with pytest.raises(JudgeError, match=r"redirected to another origin \(http://127\.0\.0\.1:\d+\); refused"):
        judge_at(f"{redirecting.origin}/v1").propose(context())
    assert other.requests == [] and len(redirecting.requests) == 1
    # Through the verifier: a judge failure, the group keeps GRPO credit.
    segment, logs = make_segment_verifier(judge_at(f"{redirecting.origin}/v1"))(
        [expert_traj(), failed_traj(), error_traj()], QUESTION, FakeWorker({}), {"num_continuations": 2})
    assert segment is None and logs["judge_failure"] == 1.0 and other.requests == []


def test_a_redirect_within_the_endpoint_is_followed(endpoint):
    def moved(handler, e):
        if handler.path.startswith("/v1/"):
            e.send(handler, b"", status=307, Location="/v2/chat/completions")
        else:
            e.send(handler, completion())

    server = endpoint(moved)
    proposal = judge_at(f"{server.origin}/v1").propose(context())
    assert (proposal.start, proposal.end) == (2, 3)
    assert server.requests == ["/v1/chat/completions", "/v2/chat/completions"]


def test_the_endpoint_is_asked_for_an_uncompressed_reply(endpoint):
    seen = []

    def record(handler, e):
        seen.append(handler.headers.get("Accept-Encoding"))
        e.send(handler, completion())

    server = endpoint(record)
    judge_at(f"{server.origin}/v1").propose(context())
    assert seen == ["identity"]


@pytest.mark.parametrize("bad", [0, -1, "1MB", True])
def test_a_bad_cap_is_one_line(bad):
    with pytest.raises(ValueError, match=rf"^judge\.max_reply_bytes must be an integer >= 1, got {bad!r}$"):
        judge_at("http://127.0.0.1:9/v1", max_reply_bytes=bad)
