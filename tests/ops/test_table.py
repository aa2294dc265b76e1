"""Terminal tables (gateway/ops/table.py): columns line up by display width, CJK included."""

from __future__ import annotations

from gateway.ops.table import display_width, table


def test_display_width_counts_wide_characters_twice() -> None:
    assert display_width("abc") == 3
    assert display_width("密钥") == 4 and display_width("ＡＢ") == 4
    assert display_width("e\u0301") == 1  # a combining accent takes no column


def test_table_aligns_cjk_cells_and_right_aligned_counts() -> None:
    lines = table(("NAME", "COUNT", "NOTE"), [("密钥轮换", "7", "x"), ("a", "12345", "")], right=frozenset({1}))
    assert lines == ["NAME      COUNT  NOTE",
                     "密钥轮换      7  x",
                     "a         12345"]
