"""gateway.console.synonyms_file on real files: checked whole, written atomically (a reader never
sees half a file), the base check, the bounded history beside the file, the one-step revert."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gateway.console import synonyms_file as sf
from indexes.synonyms import SynonymError, parse

START = "# hr\n年假, 带薪年休假\n"


@pytest.fixture(name="path")
def _path(tmp_path: Path) -> Path:
    p = tmp_path / "synonyms" / "hr.txt"
    p.parent.mkdir()
    p.write_text(START, "utf-8")
    p.chmod(0o640)
    return p


def test_every_refused_line_is_named_and_nothing_is_written(path: Path) -> None:
    bad = "年假, 带薪年休假\n孤单\n辞退,,开除 => 解除\n# ok\na => b => c\n"
    with pytest.raises(sf.SynonymsRefused) as got:
        sf.write(path, "synonyms/hr.txt", bad, sf.digest(START), who="otto")
    assert [n for n, _ in got.value.lines] == [2, 3, 5]
    assert "names one term" in got.value.lines[0][1] and "empty term" in got.value.lines[1][1]
    assert path.read_text("utf-8") == START and not sf.history_path(path).exists()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(("line", "code", "at"), [
    ("年假\u202e, 带薪年休假", "202E", 3), ("\u200b年假, 带薪年休假", "200B", 1), ("年假, 带薪\x07年休假", "0007", 7),
    ("# 注释\u2066", "2066", 5)])
def test_a_line_holding_a_character_that_cannot_be_seen_is_refused_by_position(
        path: Path, line: str, code: str, at: int) -> None:
    with pytest.raises(sf.SynonymsRefused) as got:
        sf.write(path, "synonyms/hr.txt", START + "辞退, 开除\n" + line + "\n", sf.digest(START), who="otto")
    [(n, problem)] = got.value.lines
    assert n == 4 and f"(U+{code} at character {at})" in problem
    assert path.read_text("utf-8") == START and not sf.history_path(path).exists()
    assert sf.check(START + "辞退,\t开除\n", "synonyms/hr.txt").rules  # a tab is only a space


def test_a_write_replaces_the_file_whole_keeps_its_mode_and_records_who_and_what(path: Path) -> None:
    inode = path.stat().st_ino
    text = START + "辞退, 开除 => 解除劳动合同\n"
    rules = sf.write(path, "synonyms/hr.txt", text, sf.digest(START), who="otto", now=1000.0)
    assert {r.term for r in rules.rules} >= {"辞退", "开除", "年假"}
    assert path.read_text("utf-8") == text
    assert path.stat().st_ino != inode  # renamed over: the reload's fingerprint sees a new inode
    assert path.stat().st_mode & 0o777 == 0o640
    [entry] = sf.history(path)
    assert entry["by"] == "otto" and entry["at"] == 1000.0 and entry["action"] == "save"
    assert entry["added"] == ["辞退, 开除 => 解除劳动合同"] and entry["removed"] == [] and entry["before"] == START
    assert sorted(p.name for p in path.parent.iterdir()) == ["hr.txt", "hr.txt.history.jsonl"]


def test_a_change_made_on_an_older_text_is_refused(path: Path) -> None:
    path.write_text(START + "a, b\n", "utf-8")  # someone else (or git pull) changed it meanwhile
    with pytest.raises(sf.Stale, match="changed since"):
        sf.write(path, "synonyms/hr.txt", "x, y\n", sf.digest(START), who="otto")
    assert path.read_text("utf-8") == START + "a, b\n"


def test_revert_undoes_the_last_change_and_a_second_revert_redoes_it(path: Path) -> None:
    with pytest.raises(sf.Stale, match="no change"):
        sf.revert(path, "hr.txt", who="otto", base=sf.digest(START))
    sf.write(path, "hr.txt", START + "a, b\n", sf.digest(START), who="otto")
    sf.revert(path, "hr.txt", who="ada", base=sf.digest(START + "a, b\n"))
    assert path.read_text("utf-8") == START
    assert [e["action"] for e in sf.history(path)] == ["revert", "save"]
    sf.revert(path, "hr.txt", who="ada", base=sf.digest(START))
    assert path.read_text("utf-8") == START + "a, b\n"
    path.write_text("edited, in git\n", "utf-8")
    with pytest.raises(sf.Stale, match="outside the console"):
        sf.revert(path, "hr.txt", who="ada", base=sf.digest("edited, in git\n"))
    assert path.read_text("utf-8") == "edited, in git\n"


def test_a_revert_from_a_stale_page_undoes_nothing(path: Path) -> None:
    # ada's page shows otto's rule as the last change; ben adds a rule after it: her revert
    # must not undo ben's newer rule (nor hers): it is refused and the file stays.
    sf.write(path, "hr.txt", START + "a, b\n", sf.digest(START), who="otto")
    ada_saw = sf.digest(START + "a, b\n")
    sf.write(path, "hr.txt", START + "a, b\nc, d\n", ada_saw, who="ben")
    with pytest.raises(sf.Stale, match="changed since it was opened"):
        sf.revert(path, "hr.txt", who="ada", base=ada_saw)
    assert path.read_text("utf-8") == START + "a, b\nc, d\n"
    assert [e["by"] for e in sf.history(path)] == ["ben", "otto"]


def test_the_history_is_bounded(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sf, "MAX_HISTORY", 3)
    text = START
    for n in range(5):
        new = text + f"w{n}, v{n}\n"
        sf.write(path, "hr.txt", new, sf.digest(text), who="otto")
        text = new
    kept = sf.history(path)
    assert len(kept) == 3 and kept[0]["added"] == ["w4, v4"] and kept[-1]["added"] == ["w2, v2"]


def test_a_reader_never_sees_half_a_file(path: Path) -> None:
    big = [START + "".join(f"词{n}{i}, 语{n}{i}\n" for i in range(1000)) for n in range(2)]
    path.write_text(big[0], "utf-8")
    reads = [0]
    torn: list[int] = []  # lengths of texts that were neither the old file nor the new one
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                text = path.read_text("utf-8")
            except FileNotFoundError:  # never: os.replace leaves no gap
                text = "<missing>"
            reads[0] += 1
            if text not in big:
                torn.append(len(text))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 11):
            sf.write(path, "hr.txt", big[n % 2], sf.digest(big[(n - 1) % 2]), who="otto")
    finally:
        stop.set()
        reader.join()
    assert reads[0] > 10 and torn == []
    assert parse(path.read_text("utf-8"), "hr.txt").rules


def test_what_cannot_be_written_is_said_and_changes_nothing(path: Path) -> None:
    sf.history_path(path).mkdir()  # the history cannot be replaced (as root too, unlike a chmod)
    with pytest.raises(sf.NotWritable, match="cannot be written"):
        sf.write(path, "hr.txt", "a, b\n", sf.digest(START), who="otto")
    assert path.read_text("utf-8") == START
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_check_agrees_with_the_loader() -> None:
    with pytest.raises(SynonymError):
        parse("孤单\n", "f")
    with pytest.raises(sf.SynonymsRefused):
        sf.check("孤单\n", "f")
    assert len(sf.check("a, b\n", "f").rules) == 2
