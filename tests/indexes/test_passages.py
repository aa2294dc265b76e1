"""indexes/passages.py: the passage that answers a question, within a budget."""

from __future__ import annotations

from indexes.passages import SEPARATOR, Piece, passage, question_of_terms, sentences
from indexes.relevance import Question, Unit


def ask(*words: str) -> Question:
    return Question([Unit(w, 10.0, 1.0, w.isascii()) for w in words])


def test_sentences_end_at_chinese_and_latin_ends_and_lines_never_inside_a_number_or_name() -> None:
    text = "版本 v8.5.0 起支持。默认值为 3.5 秒！真的吗？是的；见 a.b 配置. Then it ends.\n| 列 | 值 |\n`x = 1.0;`"
    got = [text[s:e] for s, e in sentences(text)]
    # a Latin full stop ends a sentence only after a Latin word and before a space: not 配置. nor 1.0;
    assert got == ["版本 v8.5.0 起支持。", "默认值为 3.5 秒！", "真的吗？", "是的；", "见 a.b 配置. Then it ends.",
                   "| 列 | 值 |\n", "`x = 1.0;`"]
    assert sentences("") == [] and sentences("  \n ") == []


def test_the_window_reads_on_from_the_questions_words_to_the_answer_after_them() -> None:
    filler = "公司鼓励员工合理安排假期。" * 12  # 156 characters that mention nothing asked
    text = f"{filler}未休年假的处理方式如下。当年未休的年假可以顺延到次年第一季度使用。{filler}"
    got = passage([Piece("年休假", text)], ask("年假", "未休", "处理"), 120)
    # led by its heading, starting at most two sentences before the words, reading on to the answer
    assert got.startswith("年休假\n") and "未休年假的处理方式如下。当年未休的年假可以顺延到次年第一季度使用。" in got
    assert "公司鼓励员工合理安排假期。" * 3 + "未休" not in got and len(got) <= 120


def test_the_hits_own_chunk_wins_a_tie_and_a_further_chunk_fills_the_room_left() -> None:
    own = Piece("", "密钥轮换前先生成新密钥。")
    other = Piece("步骤", "密钥轮换之后，旧密钥在宽限期内仍可验证回调。")
    got = passage([own, other], ask("密钥", "轮换"), 200)
    assert got == f"密钥轮换前先生成新密钥。{SEPARATOR}步骤\n密钥轮换之后，旧密钥在宽限期内仍可验证回调。"
    assert passage([own, other], ask("密钥", "轮换"), 20) == "密钥轮换前先生成新密钥。"  # no room for a second


def test_a_longer_word_counts_bigram_by_bigram_and_a_latin_word_only_whole() -> None:
    first = Piece("", "这一段什么也没说。")
    near = Piece("", "默认为 5，可调到 15。")  # 默认值 asked: half of it found in 默认为
    got = passage([first, near], ask("默认值"), 30)
    assert got == "默认为 5，可调到 15。"
    # 's' is inside 'slow' and 'logs' but nowhere on its own: the head of the first piece
    assert passage([Piece("", "slow logs here. more logs."), Piece("", "其他内容。")], ask("s"), 12) == \
        "slow logs h…"


def test_no_word_found_gives_the_head_and_the_budget_is_kept() -> None:
    assert passage([Piece("标题", "第一句话。第二句话。")], ask("无关"), 100) == "标题\n第一句话。第二句话。"
    assert passage([Piece("", "甲" * 50)], ask("甲"), 10) == "甲" * 9 + "…"
    assert passage([], ask("甲"), 10) == "" and passage([Piece("", "甲。")], ask("甲"), 0) == ""


def test_a_table_row_or_code_line_is_kept_whole_or_left_out() -> None:
    rows = "\n".join(f"| tidb_opt_{i} | 默认值 {i} |" for i in range(20))
    got = passage([Piece("系统变量", rows)], ask("tidb_opt_7"), 60)
    kept = got.split("\n")[1:]
    assert kept and all(line.startswith("| tidb_opt_") and line.endswith("|") for line in kept)
    assert "| tidb_opt_7 | 默认值 7 |" in kept


def test_a_question_without_index_statistics_weighs_its_words_alone() -> None:
    q = question_of_terms("tidb_mem_quota_query 默认值")
    assert [(u.text, u.latin) for u in q.units] == [("tidb", True), ("mem", True), ("quota", True), ("query", True),
                                                   ("默认值", False)]
    assert all(u.domain == 1.0 for u in q.units)
