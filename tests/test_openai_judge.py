"""The openai judge against a real chat-completions HTTP server on 127.0.0.1, through the openai client."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentcredit.judge.verification import make_segment_verifier
from agentcredit.judge import AgenticJudge, JudgeError, build_judge, build_judge_context
from judge_fixtures import QUESTION, FakeWorker, error_traj, expert_traj, failed_traj

API_KEY = "test-key"


class ScriptedServer:
    """Answers POST …/chat/completions with the next scripted reply (a dict body, a raw string body,
    an int HTTP status, "hang", or ("drip", body, seconds per byte): the whole body, sent one byte at a
    time) and records every request body and its Authorization header."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.release = threading.Event()
        self.dripped, self.hung_up = 0, False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.auth.append(self.headers.get("Authorization", ""))
                reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                if reply == "hang":  # longer than any bound a test puts on a hang; close() releases it
                    server.release.wait(120)
                    return
                drip = reply[2] if isinstance(reply, tuple) and reply[0] == "drip" else None
                reply = reply[1] if drip else reply
                status, payload = (reply, {"error": {"message": "boom"}}) if isinstance(reply, int) else (200, reply)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not drip:
                    self.wfile.write(data)
                    return
                try:
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        server.dripped += 1
                        if server.release.wait(drip):
                            return
                except OSError:  # the client hung up: what a bounded request does at its deadline
                    server.hung_up = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*replies):
        servers.append(ScriptedServer(replies))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def completion(content=None, tool_calls=(), tokens=10):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(tool_calls)]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "judge-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
            "usage": {"prompt_tokens": tokens - 2, "completion_tokens": 2, "total_tokens": tokens}}


def answer(start, end, rationale="opens the mayor's page"):
    return completion(json.dumps({"segment_start_turn": start, "segment_end_turn": end, "rationale": rationale}))


def judge_for(server, timeout_s=5.0, max_tool_rounds=4):
    return build_judge({"kind": "openai", "base_url": server.base_url, "model": "judge-model", "api_key": API_KEY,
                        "timeout_s": timeout_s, "max_retries": 0, "max_tool_rounds": max_tool_rounds})


def group():
    return [expert_traj(), failed_traj(), error_traj()]


def context():
    return build_judge_context(group(), QUESTION.text, chosen=0, max_segment_turns=4, success_threshold=1.0)


def test_judge_runs_both_tools_then_answers(serve):
    server = serve(
        completion(tool_calls=[("search_trajectory", {"query": "Korvel trust", "k": 2})], tokens=100),
        completion(tool_calls=[("get_segment", {"traj_id": 0, "start_turn": 2, "end_turn": 3})], tokens=200),
        answer(2, 3),
    )
    proposal = judge_for(server).propose(context())
    assert (proposal.start, proposal.end, proposal.problem) == (2, 3, None)
    assert proposal.rationale == "opens the mayor's page" and proposal.judge_tokens == 310
    assert len(server.requests) == 3 and server.auth == [f"Bearer {API_KEY}"] * 3
    first = server.requests[0]
    assert first["model"] == "judge-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["search_trajectory", "get_segment"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # The search ran on this group: its reply (sent back as the tool message) ranks rollout 1's answer first.
    search_reply = server.requests[1]["messages"][-1]
    assert search_reply["role"] == "tool" and search_reply["tool_call_id"] == "call_0"
    hits = json.loads(search_reply["content"])
    assert [(h["traj_id"], h["turn"]) for h in hits] == [(1, 3), (2, 1)]
    segment_reply = json.loads(server.requests[2]["messages"][-1]["content"])
    assert [t["turn"] for t in segment_reply["turns"]] == [2, 3] and "Ada Fenn" in segment_reply["turns"][1]["observation"]


def test_invalid_segment_is_corrected_in_the_same_conversation(serve):
    server = serve(answer(4, 5), answer(3, 4))  # 5 is the answer turn: rejected, then fixed
    worker = FakeWorker({3: [0.0] * 8, 5: [1.0] * 8})
    segment, logs = make_segment_verifier(judge_for(server))(group(), QUESTION, worker, {})
    assert (segment.start, segment.end, segment.delta) == (3, 4, 1.0)
    assert logs["judge_corrections"] == 1.0 and logs["judge_failure"] == 0.0 and logs["judge_tokens"] == 20.0
    second = server.requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and '"segment_end_turn": 5' in second[-2]["content"]
    assert second[-1]["role"] == "user" and "final (terminal) turn" in second[-1]["content"]


def test_answers_that_are_not_json_end_in_judge_failure(serve):
    server = serve(completion("I would pick turns 2 to 3."))
    worker = FakeWorker({})
    segment, logs = make_segment_verifier(judge_for(server))(group(), QUESTION, worker, {"max_judge_corrections": 3})
    assert segment is None and logs["judge_failure"] == 1.0 and logs["judge_corrections"] == 3.0
    assert len(server.requests) == 4 and "not valid JSON" in server.requests[1]["messages"][-1]["content"]
    assert worker.calls == [] and logs["extra_tokens"] == 0.0


def test_a_body_that_is_not_a_completion_is_a_judge_error(serve):
    server = serve("this is not json at all")
    with pytest.raises(JudgeError):
        judge_for(server).propose(context())


def test_http_error_is_a_judge_error(serve):
    server = serve(500)
    with pytest.raises(JudgeError, match="judge endpoint failed"):
        judge_for(server).propose(context())


def test_hanging_server_times_out_into_judge_failure(serve):
    server = serve("hang")
    with pytest.raises(JudgeError, match="timeout_s=0.5"):
        judge_for(server, timeout_s=0.5).propose(context())
    segment, logs = make_segment_verifier(judge_for(server, timeout_s=0.5))(group(), QUESTION, FakeWorker({}), {})
    # The 0.5 s timeout, not minutes: the bound leaves room for a loaded machine.
    assert segment is None and logs["judge_failure"] == 1.0 and logs["time/judge_s"] < 30


def test_last_round_offers_no_tools_and_a_judge_that_keeps_calling_fails(serve):
    server = serve(completion(tool_calls=[("search_trajectory", {"query": "mayor"})]))
    judge = judge_for(server, max_tool_rounds=1)
    assert isinstance(judge, AgenticJudge)
    with pytest.raises(JudgeError, match="kept calling tools after 1 tool rounds"):
        judge.propose(context())
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]
