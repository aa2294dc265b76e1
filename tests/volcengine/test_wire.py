"""gateway/volcengine/wire.py: Body parsing and Result shaping (the 联网问答Agent callback spec)."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.config import SearchConfig
from gateway.core.errors import CallbackError, MalformedRequest
from gateway.volcengine.wire import error_body, parse_body, result_item, success_body
from indexes.types import CoverImage, Hit

SEARCH = SearchConfig(default_limit=5, max_limit=20, max_query_chars=10)


def hit(id_: str, **kw: object) -> Hit:
    return Hit(id=id_, doc_id=id_.split("#")[0], chunk=0, title="标题", summary="摘要", content="内容", score=1.0,
               **kw)  # type: ignore[arg-type]


def test_parse_seed_example() -> None:
    raw = '{"FirstLevelId":"tech","SecondLevelId":"software","Query":"寻找相关软件信息","Limit":5}'
    req = parse_body(raw.encode(), SEARCH)
    got = (req.first_level_id, req.second_level_id, req.query, req.limit)
    assert got == ("tech", "software", "寻找相关软件信息", 5)


def test_limit_default_clamp_and_integral_float() -> None:
    assert parse_body(b'{"FirstLevelId":"a","SecondLevelId":"b","Query":"q"}', SEARCH).limit == 5
    assert parse_body(b'{"FirstLevelId":"a","SecondLevelId":"b","Query":"q","Limit":null}', SEARCH).limit == 5
    assert parse_body(b'{"FirstLevelId":"a","SecondLevelId":"b","Query":"q","Limit":999999999999}', SEARCH).limit == 20
    assert parse_body(b'{"FirstLevelId":"a","SecondLevelId":"b","Query":"q","Limit":3.0}', SEARCH).limit == 3


def test_query_bound_in_characters() -> None:
    assert parse_body('{"FirstLevelId":"a","SecondLevelId":"b","Query":"一二三四五六七八九十"}'.encode(), SEARCH)
    with pytest.raises(MalformedRequest) as exc:
        parse_body('{"FirstLevelId":"a","SecondLevelId":"b","Query":"一二三四五六七八九十一"}'.encode(), SEARCH)
    assert exc.value.code == "query_too_long"


def test_result_item_omits_unknown_optional_fields() -> None:
    assert set(result_item(hit("d1"))) == {"Id", "Title", "Summary", "KnowledgeContent"}
    full = result_item(hit("d1", url="https://x/1", publish_time=1700000000, cover_image=CoverImage("https://x/c.png")))
    assert full["CoverImage"] == {"Url": "https://x/c.png"}
    assert full["PublishTime"] == 1700000000 and full["Url"] == "https://x/1"


def test_success_body_never_repeats_an_id() -> None:
    env = orjson.loads(success_body([hit("d1#0"), hit("d1#0"), hit("d2")]))
    assert [i["Id"] for i in env["Result"]] == ["d1#0", "d2"]
    assert env["Ret"] == 0 and env["Msg"] == "success"


def test_error_body_envelope() -> None:
    env = orjson.loads(error_body(CallbackError("route_unknown", "no route")))
    assert env == {"Ret": 40402, "Msg": "no route", "Result": []}


def test_summary_is_one_line() -> None:
    h = Hit(id="d", doc_id="d", chunk=0, title="t", summary="增量更新\n再次导入时  内容未变化", content="c", score=1.0)
    assert result_item(h)["Summary"] == "增量更新 再次导入时 内容未变化"
