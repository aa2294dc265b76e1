"""The one set of test documents, indexed once per session (tests/conftest.py `docs_index`).

Two groups, one index each, so that neither's ranking depends on the other: KB_DOCS, index
'kb', the knowledge base a Volcengine tenant asks about (a document with URL, publish time
and cover image, one in Traditional Chinese, one about replay); AGENT_DOCS, index 'docs',
what agent clients read (datasets 'public' and 'internal', paths in trees, the
always-excluded config/ and state/ trees, a working draft, a hidden document, a long manual
and three wide ones for byte budgets).
"""

from __future__ import annotations

from typing import Any

from indexes.types import CoverImage, Document, Section

# 𠀋 is 4 bytes in UTF-8, 汉字 3, digits 1: page cuts must respect every width.
LONG_TEXT = "\n".join(
    f"第{i}节：运维手册说明密钥轮换与索引重建的步骤𠀋，先备份再执行，最后核对结果。" for i in range(3000)
)
SECRET_TEXT = "配置里的密钥轮换口令绝不可外泄"


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
