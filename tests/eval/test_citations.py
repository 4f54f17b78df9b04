"""The citation-validity harness on a tiny repository made here: which snippets cover the
gold code, and a run that keeps going past a bad instance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import Snippet, Span
from eval import citations
from eval.citations import _covers_gold, main, markers
from eval.swebench_data import Instance
from tests.eval.test_swebench import _git

ISSUE = (
    "parse_header crashes on an empty header\n\n"
    "Calling `parse_header('')` raises ValueError instead of returning an empty dict.\n"
)
FILES = {
    "widgets/headers.py": "def parse_header(raw):\n    key, value = raw.split(':', 1)\n"
    "    return {key.strip(): value.strip()}\n\n\ndef format_header(values):\n"
    "    return '; '.join(f'{k}: {v}' for k, v in values.items())\n",
    "widgets/render.py": "def render_page(title, body):\n    return f'<h1>{title}</h1>{body}'\n",
    "widgets/colors.py": "def blend(a, b):\n    return (a + b) / 2\n",
    "widgets/cache.py": "def cached(fn):\n    return fn\n\n\ndef clear(cache):\n"
    "    cache.clear()\n\n\ndef size(cache):\n    return len(cache)\n",
    "big.txt": "payload\n" * 50,
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Repos dir (acme/widgets, whose big.txt blob is missing from the git directory) and
    a JSONL file: two instances on it, one on a repository that is not there."""
    base = tmp_path_factory.mktemp("cit")
    repo = base / "repos" / "acme+widgets" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q", "-m", "b")
    commit = _git(repo, "rev-parse", "HEAD")
    blob = _git(repo, "rev-parse", "HEAD:big.txt")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a partial mirror's gap
    row = {"instance_id": "acme__widgets-1", "repo": "acme/widgets", "base_commit": commit,
           "problem_statement": ISSUE, "gold_files": ["widgets/headers.py"],
           "gold_functions": ["widgets/headers.py:parse_header"]}  # fmt: skip
    rows = [row, {**row, "instance_id": "acme__widgets-2"},
            {**row, "instance_id": "nobody__nothing-1", "repo": "nobody/nothing"}]  # fmt: skip
    data = base / "dev.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return base / "repos", data


def _argv(dataset: tuple[Path, Path], out: Path, *extra: str) -> list[str]:
    repos, data = dataset
    return ["--data", str(data), "--repos", str(repos), "--out", str(out), *extra]


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "citations.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")


def test_a_bad_instance_is_its_error_row_and_the_run_goes_on(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """An instance whose repository is missing is an error row listed in the report, the
    others are measured, the exit code is 1; the blobs materialise reported missing are
    recorded, not 0."""
    out = tmp_path / "out"
    assert main(_argv(dataset, out)) == 1
    rows = _rows(out)
    assert "no git directory for nobody/nothing" in rows["nobody__nothing-1"]["error"]
    for good in ("acme__widgets-1", "acme__widgets-2"):
        assert rows[good]["ledger_ok"] and rows[good]["missing_blobs"] == 1
        adversary = rows[good]["adversary"]
        assert adversary["invalid_caught"] == adversary["invalid_injected"] > 0
    marker = json.loads((out / "work" / "acme__widgets-1" / "materialised.json").read_text())
    assert marker == {"missing_blobs": 1}
    report = (out / "citations.md").read_text()
    assert "Instances: 2, budget 8000. 1 failed" in report
    assert "- nobody__nothing-1: FileNotFoundError: no git directory" in report


def test_rows_are_written_as_they_are_made(
    dataset: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped during its second instance keeps the first one's row."""
    evaluate = citations._evaluate

    def stop_second(inst: Instance, *args: Any) -> dict[str, Any]:
        if inst.instance_id == "acme__widgets-2":
            raise KeyboardInterrupt
        return evaluate(inst, *args)

    monkeypatch.setattr(citations, "_evaluate", stop_second)
    with pytest.raises(KeyboardInterrupt):
        main(_argv(dataset, tmp_path / "out"))
    assert list(_rows(tmp_path / "out")) == ["acme__widgets-1"]


def test_a_tree_left_edited_by_a_killed_run_is_written_again(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """The adversary names the file it edits until it is restored: a kept work folder
    where a killed run left it edited gets the commit's tree again."""
    work = tmp_path / "work"
    argv = _argv(dataset, tmp_path / "out", "--workdir", str(work), "--instances",
                 "acme__widgets-1")  # fmt: skip
    assert main(argv) == 0
    home = work / "acme__widgets-1"
    assert not (home / "editing.json").exists()
    source = home / "tree" / "widgets" / "render.py"
    source.write_text(FILES["widgets/render.py"] + "# edited after the turn\n")
    (home / "editing.json").write_text(json.dumps({"path": "widgets/render.py"}))
    assert main(argv) == 0
    assert source.read_text() == FILES["widgets/render.py"]
    assert not (home / "editing.json").exists()


def test_nothing_selected_and_a_work_folder_in_a_checkout_are_refused(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """A selection that matches nothing is refused by name; an --out inside a git working
    tree (its work folder would be taken for part of that checkout) is refused before
    anything is done."""
    with pytest.raises(SystemExit, match=r"matches none-\*"):
        main(_argv(dataset, tmp_path / "out", "--instances", "none-*"))
    checkout = dataset[0] / "acme+widgets" / "repo" / "out"
    with pytest.raises(SystemExit, match="inside a git working tree"):
        main(_argv(dataset, checkout))
    assert not checkout.exists()


def _snippet(uri: str, symbol: str) -> Snippet:
    return Snippet(1, "c1", uri, symbol, uri, Span(1, 3), "0" * 64, "MIT", 10, 1.0, "bm25", "x")


def test_a_hash_in_a_path_is_part_of_the_path() -> None:
    """A snippet's ``path#Lx-Ly`` is cut at its last "#": gold named with one is covered."""
    inst = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",),
                    ("mid#dle/use#it.py:use",), None)  # fmt: skip
    assert _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "use"), inst)
    assert not _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "other"), inst)
    files_only = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",), (), None)
    assert _covers_gold(_snippet("mid#dle/use#it.py#L5-L9", ""), files_only)


VERBOSE = "The bug is in [1] and [1] and again [1]; see [2], [999], [3, 4], [ 5 ], [x] and [0]."


def test_markers_are_every_bracket_as_feedback_takes_it() -> None:
    """Each bracketed marker is kept as written for the engine to parse ([ 5 ], [x] too),
    a list is one marker per item, an index or a Markdown link is no marker."""
    assert markers(VERBOSE) == ["[1]", "[1]", "[1]", "[2]", "[999]", "[3]", "[4]", "[ 5 ]",
                                "[x]", "[0]"]  # fmt: skip
    assert markers("see a[0], list[int] and [the docs](https://x)") == []


def _endpoint_run(
    dataset: tuple[Path, Path], out: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> dict[str, Any]:
    monkeypatch.setattr(citations, "_ask_endpoint", lambda *args: answer)
    argv = _argv(dataset, out, "--instances", "acme__widgets-1", "--endpoint", "http://x")
    assert main(argv) == 0
    return _rows(out)["acme__widgets-1"]


def test_the_endpoint_is_judged_per_distinct_id_by_the_engine(
    dataset: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verbose answer: [1] three times is one citation, [ 5 ] and [3, 4] are read, [x]
    is malformed and [999] and [0] out of range, both caught; validity is accepted over
    distinct cited; precision is the endpoint's alone."""
    row = _endpoint_run(dataset, tmp_path / "out", monkeypatch, VERBOSE)
    e = row["endpoint"]
    valid = len({1, 2, 3, 4, 5} & set(range(1, row["snippets"] + 1)))  # the turn's ids
    assert valid >= 2
    assert (e["mentions"], e["cited"], e["accepted"]) == (10, 8, valid)
    assert (e["malformed"], e["out_of_range"]) == (1, 7 - valid)  # [x]; [999], [0], ...
    assert e["invalid_injected"] == e["invalid_caught"] == 8 - valid
    assert (e["valid_injected"], e["valid_rejected"]) == (valid, 0)
    table = (tmp_path / "out" / "citations.md").read_text()
    assert f"| endpoint | 8 | {valid} ({100 * valid / 8:.1f}%) | 100.0% | 0 of {valid} |" in table
    oracle = next(ln for ln in table.splitlines() if ln.startswith("| oracle"))
    assert oracle.endswith("| - |")  # 100% by construction: not reported
    assert "Endpoint: 10 markers in its answers, 8 distinct cited: 1 malformed" in table


def test_more_markers_than_feedback_takes_are_trimmed(
    dataset: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer with 300 distinct markers is judged on the engine's 256 per feedback,
    the rest counted as not sent, instead of the run failing."""
    answer = " ".join(f"[{i}]" for i in range(1, 301))
    e = _endpoint_run(dataset, tmp_path / "out", monkeypatch, answer)["endpoint"]
    assert (e["mentions"], e["cited"], e["not_sent"]) == (300, 256, 44)
    assert e["invalid_caught"] == e["invalid_injected"] == 256 - e["valid_injected"]


def test_a_newer_turns_ids_against_the_older_key(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """The newer turn's ids that the older turn also has are accepted against the older
    key (feedback tells turns apart by key only), and counted so in the report."""
    out = tmp_path / "out"
    assert main(_argv(dataset, out, "--instances", "acme__widgets-1")) == 0
    a = _rows(out)["acme__widgets-1"]["adversary"]
    assert a["cross_turn"] > 0 and a["cross_turn_accepted"] == a["cross_turn"]
    assert a["invalid_caught"] == a["invalid_injected"]
    said = f"{a['cross_turn']} of the {a['cross_turn']} the older turn also has were accepted"
    assert said in (out / "citations.md").read_text()
