"""Console bodies past their limits are a 400 naming the limit, never a 500: a form with one
field more than it takes (the login form too, before anyone logs in), and JSON nested deeper
than a request's JSON may (Try's JSON twin, Try's metadata condition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support.configs import ADMIN_TOKEN, config, parse
from tests.support.console import login

pytestmark = pytest.mark.anyio
AUTH = {"authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
DEEP = "[" * 300 + "]" * 300


async def _client(tmp_path: Path, start_app: Any) -> Any:
    c, _, _ = await start_app(parse(config(tmp_path, admin_token=ADMIN_TOKEN), tmp_path))
    return c


@pytest.mark.parametrize(("path", "most"), [("/admin/gaps/mark", 4), ("/admin/try", 64), ("/admin/users", 8)])
async def test_a_form_with_a_field_too_many_is_a_400_naming_the_limit(tmp_path: Path, start_app: Any, path: str,
                                                                     most: int) -> None:
    c = await _client(tmp_path, start_app)
    assert (await login(c)).status_code == 303  # a browser's session, as a form sends
    body = urlencode({f"f{i}": "x" for i in range(most + 1)})
    r = await c.post(path, content=body, headers=FORM)
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert f"more than {most} fields" in r.text


async def test_the_login_form_with_a_field_too_many_is_a_400_naming_the_limit(tmp_path: Path,
                                                                             start_app: Any) -> None:
    c = await _client(tmp_path, start_app)
    r = await c.post("/admin/login", content=urlencode({f"f{i}": "x" for i in range(9)}), headers=FORM)
    assert r.status_code == 400 and "more than" in r.text and "fields" in r.text, (r.status_code, r.text[:300])
    assert "kbgate_admin=" not in r.headers.get("set-cookie", "")


async def test_try_json_nested_past_the_limit_is_a_400_naming_it(tmp_path: Path, start_app: Any) -> None:
    c = await _client(tmp_path, start_app)
    body = '{"query": "x", "metadata_condition": ' + DEEP + "}"
    r = await c.post("/admin/try.json", content=body, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert "64 levels" in r.json()["error"] and "limit" in r.json()["error"]


async def test_try_form_metadata_condition_nested_past_the_limit_is_a_400_naming_it(tmp_path: Path,
                                                                                   start_app: Any) -> None:
    c = await _client(tmp_path, start_app)
    body = urlencode({"query": "x", "a_caller": "volcengine", "a_metadata_condition": DEEP})
    r = await c.post("/admin/try", content=body, headers={**AUTH, **FORM})
    assert r.status_code in (200, 400), (r.status_code, r.text[:300])
    assert "64" in r.text and "levels deep" in r.text
