"""Document identity: dataset and a stable source path, never another dataset's document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexes.ingest import delete_missing_problem, document_id, read_paths
from indexes.roots import RootChoice, choose_root, read_roots, remember_root
from indexes.schema import SCHEMA_VERSION, SIDECAR
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document, IngestError, Section


def _docs(items: list[object]) -> list[Document]:
    return [d for d in items if isinstance(d, Document)]


@pytest.fixture(name="tree")
def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "top.md").write_text("# 顶层\n\n顶层正文。\n", encoding="utf-8")
    (root / "guide" / "a.md").write_text("# 甲\n\n甲的正文。\n", encoding="utf-8")
    return root


@pytest.fixture(name="index")
def _index(tmp_path: Path) -> KnowledgeIndex:
    return IndexStore(tmp_path / "indexes").create_or_open_for_write("docs")


def test_a_sub_folder_under_the_root_gets_the_ids_of_the_full_run(tree: Path) -> None:
    full = {d.id: d.path for d in _docs(list(read_paths([tree])))}
    assert full == {"guide/a.md": "guide/a.md", "top.md": "top.md"}
    sub = _docs(list(read_paths([tree / "guide"], root=tree)))
    assert [(d.id, d.path) for d in sub] == [("guide/a.md", "guide/a.md")]
    [one] = _docs(list(read_paths([tree / "guide" / "a.md"], root=tree)))
    assert one.id == "guide/a.md"


def test_a_path_outside_the_root_is_an_error(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# x\n\n正文。\n", encoding="utf-8")
    [item] = list(read_paths([other], root=tree))
    assert isinstance(item, IngestError) and "outside the root" in item.reason


def test_a_dataset_namespaces_tree_ids_and_keeps_the_path(tree: Path) -> None:
    assert document_id("", "a.md") == "a.md" and document_id("ds1", "a.md") == "ds1:a.md"
    docs = _docs(list(read_paths([tree], dataset="ds1")))
    assert {(d.id, d.path, d.dataset) for d in docs} == {("ds1:guide/a.md", "guide/a.md", "ds1"),
                                                         ("ds1:top.md", "top.md", "ds1")}
    (tree / "own.md").write_text("---\ndataset: mine\n---\n# 自己\n\n正文。\n", encoding="utf-8")
    own = {d.path: (d.id, d.dataset) for d in _docs(list(read_paths([tree], dataset="ds1")))}
    assert own["own.md"] == ("mine:own.md", "mine")  # its own dataset wins over --dataset


def test_two_datasets_holding_the_same_file_are_two_documents(tmp_path: Path, index: KnowledgeIndex) -> None:
    for name, text in (("ds1", "第一个数据集的内容。"), ("ds2", "第二个数据集的内容。")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "same.md").write_text(f"# 同名\n\n{text}\n", encoding="utf-8")
    first = index.ingest(read_paths([tmp_path / "ds1"], dataset="ds1"), progress=False)
    second = index.ingest(read_paths([tmp_path / "ds2"], dataset="ds2"), progress=False)
    assert (first.added, second.added, second.updated) == (1, 1, 0)
    one, two = index.get_document("ds1:same.md"), index.get_document("ds2:same.md")
    assert one is not None and "第一个" in one.text and one.dataset == "ds1"
    assert two is not None and "第二个" in two.text and two.dataset == "ds2"


def _row(doc_id: str, dataset: str, text: str) -> Document:
    return Document(doc_id, "标题", (Section("", text),), dataset=dataset, origin=f"rows.jsonl:{doc_id}")


def test_an_id_another_dataset_holds_is_refused_never_replaced(index: KnowledgeIndex) -> None:
    index.ingest([_row("7", "ds1", "原来的内容")], progress=False)
    report = index.ingest([_row("7", "ds2", "别的数据集")], progress=False)
    assert (report.added, report.updated) == (0, 0)
    [(where, reason)] = report.errors
    assert where == "rows.jsonl:7" and "dataset 'ds1' in the index" in reason and "refused" in reason
    kept = index.get_document("7")
    assert kept is not None and kept.text == "原来的内容" and kept.dataset == "ds1"
    # and inside one run: the later one is refused, the first kept
    report = index.ingest([_row("8", "ds1", "甲"), _row("8", "ds2", "乙")], progress=False)
    assert report.added == 1 and "dataset 'ds1' in this run" in report.errors[0][1]


def test_delete_missing_deletes_only_inside_the_datasets_of_the_run(index: KnowledgeIndex) -> None:
    index.ingest([_row("a", "ds1", "甲"), _row("b", "ds2", "乙"), _row("c", "ds2", "丙")], progress=False)
    report = index.ingest([_row("b", "ds2", "乙")], delete_missing=True, progress=False)
    assert (report.deleted, report.unchanged) == (1, 1)
    assert index.get_document("a") is not None and index.get_document("c") is None


def test_delete_missing_is_not_run_when_the_run_read_no_document(index: KnowledgeIndex) -> None:
    index.ingest([_row("a", "", "甲")], progress=False)
    report = index.ingest([], delete_missing=True, progress=False)
    assert report.deleted == 0 and index.get_document("a") is not None
    assert report.warnings == [("--delete-missing", "not run: this run read no document, so no document was "
                                                    "deleted")]


def test_delete_missing_refuses_a_folder_below_the_root(tree: Path) -> None:
    assert delete_missing_problem([tree], tree) is None
    problem = delete_missing_problem([tree / "guide"], tree)
    assert problem is not None and "below the root" in problem and "--force" in problem


def test_roots_are_recorded_per_dataset_in_the_sidecar(index: KnowledgeIndex, tree: Path) -> None:
    assert read_roots(index.path) == {}
    remember_root(index.path, "docs", "ds1", str(tree))
    remember_root(index.path, "docs", "", "/elsewhere")
    assert read_roots(index.path) == {"ds1": str(tree), "": "/elsewhere"}
    sidecar = json.loads((index.path / SIDECAR).read_text(encoding="utf-8"))
    assert sidecar["chunk_chars"] == index.chunk_chars and sidecar["schema_version"] == SCHEMA_VERSION


def test_choose_root(tree: Path, tmp_path: Path) -> None:
    top, sub = str(tree.resolve()), str(tree / "guide")
    assert choose_root(None, [str(tree)], None) == RootChoice(top, record=top)
    assert choose_root(None, [sub], top) == RootChoice(top, record=top)
    assert choose_root(str(tree), [sub], None) == RootChoice(top, record=top)
    refused = choose_root(str(tree / "guide"), [str(tree)], None)
    assert refused.root is None and refused.problem is not None and "not inside --root" in refused.problem
    assert choose_root(None, [sub, str(tree / "top.md")], None) == RootChoice(None)


def test_a_run_outside_the_recorded_root_is_refused_naming_the_command(tree: Path, tmp_path: Path) -> None:
    top, sub = str(tree.resolve()), str((tree / "guide").resolve())
    wider = choose_root(None, [str(tree)], sub, command="kbgate index add --index docs")
    assert wider.root is None and wider.record is None and wider.problem is not None
    assert f"holds {sub}" in wider.problem
    assert f"kbgate index add --index docs --root {tree} --delete-missing {tree}" in wider.problem
    sibling = tmp_path / "docs2"
    sibling.mkdir()
    aside = choose_root(None, [str(sibling)], top, command="kbgate index add --index docs")
    assert aside.root is None and aside.problem is not None and "is outside" in aside.problem
    assert f"--root {sibling} {sibling}" in aside.problem
    # --root chooses this run's root; the recorded one stays, unless the run re-keys the dataset
    once = choose_root(str(sibling), [str(sibling)], top)
    assert once.root == str(sibling.resolve()) and once.record is None and "stays" in str(once.note)
    rekey = choose_root(str(tree), [str(tree)], sub, delete_missing=True)
    assert rekey == RootChoice(top, note=rekey.note, record=top) and "moves" in str(rekey.note)
    # a recorded root that is not a folder here (another checkout): name the new place
    gone = choose_root(None, [str(tree)], "/no/such/checkout")
    assert gone.problem is not None and "--root DIR" in gone.problem
    assert choose_root(str(tree), [str(tree)], "/no/such/checkout").record == top
