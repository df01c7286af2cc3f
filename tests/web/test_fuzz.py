"""The API fuzzed from its own OpenAPI document (schemathesis on hypothesis), against a real ``turnback serve``:
valid and invalid requests to every operation, with made-up ids and with the ids of a real session and call.
No request gets a 500; every answer has a documented status, content type and shape; and nothing on disk
changes, since no request can name the plan that was shown (a made-up plan id names none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.conftest import tree_state
from tests.web.serving import Served, serve

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra: make test")
pytest.importorskip("uvicorn", reason="turnback serve needs the web extra (in dev): make test")

from hypothesis import HealthCheck, given, settings  # noqa: E402 - after the skips
from hypothesis import strategies as st  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = 12  # per operation and generation mode: the whole run stays well under a minute on two cores
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    server = serve(home)
    yield server
    assert server.stop() == 0, server.stderr.decode(errors="replace")


def test_the_openapi_document_loads_and_names_every_route(served: Served) -> None:
    reply = served.get("/api/v1/openapi.json")
    assert reply.status == 200
    document = reply.json()
    assert document["openapi"].startswith("3.1")
    schema = schemathesis.openapi.from_dict(document)
    operations = {(op.method.upper(), op.path) for op in (result.ok() for result in schema.get_all_operations())}
    session = "/api/v1/sessions/{session}"
    assert operations == {
        ("GET", "/api/v1/messages"),
        ("GET", "/api/v1/sessions"),
        ("GET", f"{session}/history"),
        ("GET", f"{session}/status"),
        ("GET", f"{session}/files"),
        ("GET", f"{session}/calls/{{call}}"),
        ("POST", f"{session}/calls/{{call}}/revert"),
        ("POST", f"{session}/undo"),
        ("POST", f"{session}/redo"),
        ("POST", f"{session}/rollback"),
        ("POST", f"{session}/resend"),
        ("GET", "/api/v1/events"),
        ("GET", "/api/v1/openapi.json"),
    }


def test_fuzzing_every_operation_gives_no_500_and_changes_nothing_on_disk(
    served: Served, engine: turnback.Engine, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_bytes(b"one\ntwo\n")
    session = engine.new_session(str(root), title="fuzzed")
    engine.begin_turn(session.id, "edit and write")
    call = engine.edit(session.id, "a.txt", "two", "TWO", cwd=str(root))
    engine.write(session.id, "new.txt", b"new\n", cwd=str(root))
    engine.end_turn(session.id)
    before = tree_state(root)

    schema = schemathesis.openapi.from_dict(served.get("/api/v1/openapi.json").json())
    auth = {"Authorization": f"Bearer {served.token}"}
    real = {"session": session.id, "call": call.id}
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/api/v1/events":
            continue  # a stream that never ends: test_api reads it
        known = {name: value for name, value in real.items() if f"{{{name}}}" in operation.path}
        strategies = [
            operation.as_strategy(mode, path_parameters=params)
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            for params in ({}, *([known] if known else []))
        ]

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=st.one_of(strategies))
        def check(case: schemathesis.Case) -> None:
            nonlocal tried
            tried += 1
            case.call_and_validate(base_url=served.origin, headers=auth, checks=CHECKS, timeout=30)

        check()
        assert tree_state(root) == before, operation.path
    assert tried >= 12 * EXAMPLES
