"""The one set of test documents, indexed once per session (tests/conftest.py `docs_index`).

Rationale: docs/design-notes.md, "tests/support/documents.py".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from indexes.types import CoverImage, Document, Section

# 𠀋 is 4 bytes in UTF-8, 汉字 3, digits 1: page cuts must respect every width.
LONG_TEXT = "\n".join(
    f"第{i}节：运维手册说明密钥轮换与索引重建的步骤𠀋，先备份再执行，最后核对结果。" for i in range(3000)
)
SECRET_TEXT = "配置里的密钥轮换口令绝不可外泄"


def one_section(doc_id: str, text: str, **kw: Any) -> Document:
    """A Document of one untitled section; title 标题{doc_id} unless `title` is given."""
    return Document(doc_id, kw.pop("title", f"标题{doc_id}"), (Section("", text),), **kw)


def _doc(doc_id: str, title: str, text: str, **kw: Any) -> Document:
    return Document(doc_id, title, (Section("", text),), path=kw.pop("path", doc_id), **kw)


KB_DOCS = [
    Document("kb-1", "密钥轮换", (Section("", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。"),),
             url="https://kb.example.com/1", publish_time=1_700_000_000,
             cover_image=CoverImage("https://kb.example.com/1.png", 300, 400), dataset="kb"),
    Document("kb-2", "軟體安裝指南", (Section("", "下載軟體安裝包後，執行安裝程式並依照提示完成設定。"),),
             dataset="kb"),
    Document("kb-3", "重放攻击防护", (Section("", "每个随机串在时间窗口内只能使用一次，重复投递会被拒绝。"),),
             dataset="kb"),
]

AGENT_DOCS = [
    _doc("guide/key-rotation.md", "密钥轮换", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。", dataset="public"),
    _doc("guide/replay.md", "重放攻击防护", "每个随机串在时间窗口内只能使用一次，重复投递会被拒绝。",
         dataset="internal"),
    _doc("ops/deploy.md", "部署与密钥", "部署时把密钥放进环境变量，轮换时滚动重启。", dataset="public"),
    _doc("config/secrets.md", "密钥轮换配置", SECRET_TEXT, dataset="public"),
    _doc("state/manifest.md", "密钥轮换状态", "状态文件记录密钥轮换的进度。", dataset="public"),
    _doc("working/draft.md", "密钥轮换草稿", "草稿：密钥轮换的新流程，尚未发布。", dataset="public"),
    _doc("guide/hidden.md", "密钥轮换内部", "隐藏文档：密钥轮换的内部细节。", dataset="public", qa_visible=False),
    _doc("long/manual.md", "运维手册", LONG_TEXT, dataset="public"),
    *[
        _doc(f"wide/budget-{n}.md", f"预算说明{n}" + "很长的标题" * 39, "预算超出时丢弃提示而不是截断。" * 20,
             dataset="public")
        for n in range(3)
    ],
]

DOCS = [*KB_DOCS, *AGENT_DOCS]
INDEXES = {"kb": KB_DOCS, "docs": AGENT_DOCS}  # index name → its documents

PARAPHRASE = "忘记密码了怎么办"  # answered by 'pw' (重置管理员口令), with which it shares no word
HYBRID_DOCS = [
    _doc("pw", "账号管理", "重置管理员口令：在登录页点击找回，按邮件里的链接设置新口令。", dataset="public"),
    _doc("scale", "集群扩容", "向集群添加新的存储节点，数据会自动均衡。", dataset="public"),
    _doc("slow", "慢日志", "记录执行时间超过阈值的语句。", dataset="internal"),
    _doc("br", "备份", "使用 BR 工具把全量数据备份到 S3 对象存储。", dataset="public"),
    _doc("secret", "内部口令表", "忘记密码时不要来这里找：这是隐藏的内部口令表。", dataset="public", qa_visible=False),
]

CALIBRATION_DOCS = [_doc(i, title, text) for i, title, text in (
    ("backup", "备份与恢复", "使用 BR 工具把全量数据备份到 S3 对象存储。恢复时先停写入，再从备份导入。"),
    ("scale", "集群扩容", "向集群添加新的存储节点，数据会自动均衡到新节点上。扩容前先检查磁盘容量。"),
    ("slowlog", "慢查询日志", "记录执行时间超过阈值的语句，可按耗时排序找出最慢的查询。"),
    ("password", "账号管理", "重置管理员口令：在登录页点击找回，按邮件里的链接设置新口令。"),
    ("upgrade", "版本升级", "滚动升级时逐个重启节点，升级前阅读兼容性说明并备份配置文件。"),
    ("monitor", "监控告警", "通过面板查看节点的 CPU、内存和磁盘使用率，超过阈值时发送告警邮件。"),
    ("tls", "传输加密", "为客户端和服务端之间的连接开启 TLS，证书过期前需要轮换。"),
    ("ddl", "在线变更表结构", "添加列和索引不会锁表，大表加索引时可以调低并发以减少对业务的影响。"),
    ("import", "数据导入", "用导入工具把 CSV 文件批量写入数据库，导入前先建好表结构。"),
    ("quota", "资源配额", "为每个租户设置读写请求的配额，超过配额的请求会被限流。"),
    ("audit", "审计日志", "审计日志记录谁在什么时间执行了哪些操作，保存九十天。"),
    ("ttl", "过期数据清理", "为表设置存活时间后，过期的行会在后台被自动删除。"),
)]


def as_jsonl(docs: Iterable[Document]) -> str:
    """`docs` as JSONL records (id, title, content, path, dataset, qa_visible), one per line."""
    return "".join(orjson.dumps({"id": d.id, "title": d.title, "content": "\n\n".join(s.text for s in d.sections),
                                 "path": d.path, "dataset": d.dataset, "qa_visible": d.qa_visible}).decode() + "\n"
                   for d in docs)
