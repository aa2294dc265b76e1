"""One page of a read-by-reference answer (Agent知识按需搜索与读取 "按引用分页读取"), cut to its byte budgets.

The budgets count UTF-8 bytes: the whole response JSON of one page is at most `max_bytes`,
and one chain of pages (a ref and its cursors) delivers at most READ_CHAIN_MAX_BYTES of
content. Content is cut only between characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.core.errors import AgentError

READ_CHAIN_MAX_BYTES = 131072  # Agent知识按需搜索与读取 limits.read_chain_max_bytes


def page(base: dict[str, Any], text: str, offset: int, consumed: int, max_bytes: int,
         mint_cursor: Callable[[int, int], str]) -> dict[str, Any]:
    """One read page of `text` from character `offset`, with `consumed` content bytes
    already delivered in the chain.

    The content is the longest run of whole characters such that the complete response
    JSON is ≤ max_bytes and the chain stays ≤ READ_CHAIN_MAX_BYTES (131072 bytes). The page ends the
    chain (next_cursor None) at the end of the text, or — with truncated and
    budget_exhausted true — when the next character would pass the chain budget.
    `truncated` is true whenever the content stops before the end of the text.
    """
    chain_max = READ_CHAIN_MAX_BYTES
    window = text[offset: offset + max_bytes]  # a character is ≥ 1 byte: nothing beyond can fit
    sizes = [0]
    for ch in window:
        sizes.append(sizes[-1] + len(ch.encode("utf-8")))
    total = len(text.encode("utf-8"))
    budget = chain_max - consumed

    def build(k: int) -> dict[str, Any]:
        end = offset + k
        used = consumed + sizes[k]
        at_end = end == len(text)
        exhausted = not at_end and used + len(text[end].encode("utf-8")) > chain_max
        return {**base, "content": window[:k],
                "next_cursor": None if at_end or exhausted else mint_cursor(end, used),
                "truncated": not at_end, "budget_exhausted": exhausted,
                "total_content_bytes": total, "read_chain_max_bytes": chain_max}

    def fits(k: int) -> bool:
        return len(orjson.dumps(build(k))) <= max_bytes

    hi = len(window)
    while hi > 0 and sizes[hi] > budget:
        hi -= 1
    lo = 0
    if fits(hi):  # only k = hi can end the chain (no cursor), so test it on its own
        lo = hi
    else:
        hi -= 1
    while lo < hi:  # largest k in [0, hi] that fits; below hi the size grows with k
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not fits(lo):  # the cursor's length is only nearly monotone
        lo -= 1
    result = build(lo)
    if lo == 0 and result["next_cursor"] is not None:
        raise AgentError("internal", "a read page cannot hold any content")
    return result
