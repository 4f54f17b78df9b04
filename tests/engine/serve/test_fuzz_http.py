"""API fuzzing from the server's own OpenAPI schema (schemathesis) against a real
``cortex serve`` on 127.0.0.1: no generated request gets a 500, and the server answers
``/healthz`` after every case. Bounded (a few cases per operation) so CI stays fast."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.engine.serve.test_http import TOKEN, Server, server  # noqa: F401 - the fixture

CASES_PER_OPERATION = 12


def test_no_generated_request_is_a_500(server: Server) -> None:  # noqa: F811
    """Every operation of /openapi.json, fed schemathesis' generated requests (valid and
    invalid), answers below 500; /healthz answers after each."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json", headers=auth)
    failures: list[str] = []
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) >= 8
    for operation in operations:
        if operation.path == "/v1/index":  # a full re-index per case: slow, and covered
            continue

        @settings(max_examples=CASES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            response = case.call(base_url=server.url, headers=auth, timeout=30)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}")
            assert server.request("GET", "/healthz", token=None)[0] == 200

        run()
    assert not failures, failures
