"""The question-set runner's scoring: primary answer in the context, coverage, relevance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import Config, Workspace
from eval.baseline_bm25 import Bm25Files
from eval.questions import (
    DEFAULT_QUESTIONS,
    Answer,
    Question,
    baseline_suffixes,
    compare,
    load_questions,
    main,
    score_pack,
)
from eval.questions import _ours as ask_ours
from tests.eval.test_swebench import _git

Q = Question(
    "x-01", "o/r", "0" * 40, "python", "where", "where is the thing done?",
    (Answer("a.py", 10, 29, True), Answer("b.py", 1, 10, False)),
)  # fmt: skip


def test_primary_needs_half_of_its_lines_or_fifteen() -> None:
    """Half of a short primary range, or 15 lines of a long one, count as in the context."""
    assert score_pack(Q, [("a.py", 10, 19)])["primary_in"]
    assert not score_pack(Q, [("a.py", 10, 18)])["primary_in"]
    long = Question("x-02", "o/r", "0" * 40, "c", "how", "q", (Answer("a.py", 1, 200, True),))
    assert score_pack(long, [("a.py", 50, 64)])["primary_in"]


def test_coverage_relevance_and_file() -> None:
    """Coverage counts answer lines held once; relevance is the share of snippets touching
    an answer; the primary's file counts when any of its lines is cited."""
    got = score_pack(Q, [("a.py", 25, 40), ("a.py", 28, 35), ("c.py", 1, 5), ("b.py", 1, 2)])
    assert got["coverage"] == pytest.approx((5 + 2) / 30)
    assert got["relevant"] == pytest.approx(3 / 4)
    assert got["file_cited"] and got["snippets"] == 4
    assert score_pack(Q, [])["relevant"] is None


def test_the_shipped_questions_are_well_formed() -> None:
    """The shipped set: >= 30 questions, >= 5 repositories and languages, every kind, one
    primary answer each, pinned commits and sane line ranges."""
    questions = load_questions(DEFAULT_QUESTIONS)
    assert len(questions) >= 30
    assert len({q.repo for q in questions}) >= 5 and len({q.language for q in questions}) >= 5
    assert {q.kind for q in questions} == {"where", "why", "how", "config", "docs", "tests"}
    assert len({q.id for q in questions}) == len(questions)
    for q in questions:
        assert len(q.commit) == 40 and q.primary in q.answers
        assert all(1 <= a.start_line <= a.end_line for a in q.answers)


def test_load_refuses_an_answer_ending_before_it_starts(tmp_path: Path) -> None:
    """An answer whose last line comes before its first (an empty range every context
    would hold) is refused, naming the question."""
    row = {"id": "q-7", "repo": "o/r", "commit": "0" * 40, "language": "go", "kind": "where",
           "question": "q", "answers": [{"path": "mux.go", "start_line": 50, "end_line": 40,
                                         "primary": True}]}  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"q-7: answer mux\.go lines 50-40"):
        load_questions(path)


def _scored(qid: str, held: dict[int, bool]) -> dict[str, Any]:
    return {"id": qid, "ours": {str(b): {"primary_in": v} for b, v in held.items()}}


def test_compare_says_n_and_a_budget_the_previous_run_lacks() -> None:
    """The comparison is over the questions both runs answered, says how many, and names a
    budget the previous run did not use instead of failing on it."""
    before = [_scored("a", {4000: False}), _scored("b", {4000: True}),
              {"id": "c", "error": "LookupError: no commit"}]  # fmt: skip
    now = [_scored("a", {4000: True, 8000: True}), _scored("b", {4000: True, 8000: False}),
           _scored("c", {4000: True, 8000: True})]  # fmt: skip
    assert compare(before, now, [4000, 8000]).splitlines() == [
        "primary_in@4000: 50.0 -> 100.0 (n 2)",
        "primary_in@8000: the previous run has no budget 8000 (it ran [4000])",
        "compared on the 2 questions both runs answered (previous 2, this one 3)",
    ]


def test_load_refuses_two_primaries(tmp_path: Path) -> None:
    """A question must mark exactly one answer primary."""
    row = {"id": "y", "repo": "o/r", "commit": "0" * 40, "language": "go", "kind": "where",
           "question": "q", "answers": [{"path": "a", "start_line": 1, "end_line": 2,
                                         "primary": True}] * 2}  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="exactly one"):
        load_questions(path)


ASK = "Why do I get 'all middlewares must be defined before routes' when I add one?"
RAISE = (
    "def use(middleware):\n"
    '    """Add a middleware to the stack."""\n'
    "    raise RuntimeError('all middlewares must be defined before routes')\n"
)


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """Repos dir with acme/router, whose second commit moves the panic to another file;
    and the two commits."""
    base = tmp_path_factory.mktemp("q")
    repo = base / "repos" / "acme+router" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "T")
    (repo / "router.py").write_text(RAISE)
    (repo / "colors.py").write_text("def blend(a, b):\n    return (a + b) / 2\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "core").mkdir()
    _git(repo, "mv", "router.py", "core/mux.py")
    _git(repo, "commit", "-q", "-m", "moved")
    return base / "repos", first, _git(repo, "rev-parse", "HEAD")


def _question(qid: str, commit: str, path: str) -> dict[str, Any]:
    answer = {"path": path, "start_line": 1, "end_line": 3, "primary": True}
    return {"id": qid, "repo": "acme/router", "commit": commit, "language": "python",
            "kind": "why", "question": ASK, "answers": [answer]}  # fmt: skip


def _run(tmp_path: Path, repos: Path, rows: list[dict[str, Any]], *extra: str) -> int:
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--repos", str(repos), "--out", str(tmp_path / "out"), "--questions", str(data),
            "--budgets", "2000", "--dense", "hash", *extra]  # fmt: skip
    return main(argv)


def _results(tmp_path: Path) -> dict[str, dict[str, Any]]:
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def test_each_commit_is_asked_on_its_own_tree(
    router: tuple[Path, str, str], tmp_path: Path
) -> None:
    """Two commits of one repository are each answered on their own tree (the second one
    is not asked on the first one's), also when a kept work folder held another commit."""
    repos, first, second = router
    rows = [_question("old", first, "router.py"), _question("new", second, "core/mux.py")]
    assert _run(tmp_path, repos, rows) == 0
    got = _results(tmp_path)
    assert got["old"]["ours"]["2000"]["primary_in"] and got["new"]["ours"]["2000"]["primary_in"]
    assert got["new"]["ours"]["file@1"] and got["new"]["baseline"]["file@1"]
    # A kept work folder now holding the second commit is swapped back for the first one.
    assert _run(tmp_path, repos, rows[:1]) == 0
    assert _results(tmp_path)["old"]["ours"]["2000"]["primary_in"]


def test_a_bad_commit_or_repository_is_its_questions_error(
    router: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A question pinned to a commit that does not exist, or of a repository not under
    --repos, is an error row (never asked on another tree); the others are scored, the
    report lists the failures and the exit code says so."""
    repos, first, _ = router
    rows = [_question("old", first, "router.py"), _question("gone", "1" * 40, "router.py"),
            {**_question("elsewhere", first, "router.py"), "repo": "acme/nothing"}]  # fmt: skip
    assert _run(tmp_path, repos, rows) == 1
    got = _results(tmp_path)
    assert got["old"]["ours"]["2000"]["primary_in"]
    assert got["gone"]["error"].startswith("LookupError: no commit 1111")
    assert "no git directory for acme/nothing" in got["elsewhere"]["error"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "1 questions, budgets [2000]. 2 failed" in report
    assert "| gone | acme/router @ 111111111111 | LookupError: no commit" in report
    assert "2 of 3 questions failed" in capsys.readouterr().err


def test_rows_are_written_as_they_are_made(
    router: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped after its first question keeps that question's row."""
    repos, first, _ = router
    import eval.questions as questions

    asked = questions._baseline

    def stop_second(*args: Any) -> dict[str, Any]:
        if args[1].id == "second":
            raise KeyboardInterrupt
        return asked(*args)

    monkeypatch.setattr(questions, "_baseline", stop_second)
    rows = [_question("first", first, "router.py"), _question("second", first, "router.py")]
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, repos, rows)
    assert list(_results(tmp_path)) == ["first"]


def test_nothing_selected_and_a_work_folder_in_a_checkout_are_refused(
    router: tuple[Path, str, str], tmp_path: Path
) -> None:
    """--repo matching no question exits 1; an --out inside a git working tree (its work
    folder would be taken for part of that checkout) is refused before anything is done."""
    repos, first, _ = router
    rows = [_question("old", first, "router.py")]
    assert _run(tmp_path, repos, rows, "--repo", "nobody/x") == 1
    assert not (tmp_path / "out").exists()
    checkout = repos / "acme+router" / "repo"
    argv = ["--repos", str(repos), "--out", str(checkout / "out"), "--questions",
            str(tmp_path / "q.jsonl")]  # fmt: skip
    with pytest.raises(SystemExit, match="inside a git working tree"):
        main(argv)
    assert not (checkout / "out").exists()


def test_the_baseline_reads_every_code_language_and_the_docs(tmp_path: Path) -> None:
    """The file baseline reads what cortex chunks as code in any language (PHP, Ruby, C#,
    Kotlin, Swift, ...), documentation (MDX too) and text, tests included; not data files."""
    names = ["src/Client.php", "lib/app.rb", "src/App.cs", "src/Main.kt", "Sources/A.swift",
             "src/index.mjs", "docs/api.mdx", "README.md", "NOTES.txt", "spec/app_spec.rb",
             "package.json", "logo.svg"]  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("client request\n")
    read = Bm25Files(tmp_path, suffixes=baseline_suffixes(), tests=True).paths
    assert sorted(read) == sorted(names[:-2])


def test_compare_with_a_run_of_other_budgets(
    router: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--compare against a run made with other budgets says so and still exits 0."""
    repos, first, _ = router
    rows = [_question("old", first, "router.py")]
    (tmp_path / "a").mkdir()
    assert _run(tmp_path / "a", repos, rows) == 0
    assert _run(tmp_path, repos, rows, "--budgets", "1000,2000", "--compare",
                str(tmp_path / "a" / "out")) == 0  # fmt: skip
    shown = capsys.readouterr().out
    assert "primary_in@1000: the previous run has no budget 1000 (it ran [2000])" in shown
    assert "primary_in@2000: 100.0 -> 100.0 (n 1)" in shown


def test_a_hash_in_a_path_is_part_of_the_path(tmp_path: Path) -> None:
    """A cited ``path#Lx-Ly`` is cut at its last "#": a file named with one is held."""
    tree = tmp_path / "tree"
    (tree / "mid#dle").mkdir(parents=True)
    (tree / "mid#dle" / "use#it.py").write_text(RAISE)
    q = Question("h-1", "o/r", "0" * 40, "python", "why", ASK,
                 (Answer("mid#dle/use#it.py", 1, 3, True),))  # fmt: skip
    config = Config(state_dir=str(tmp_path / "state"), ledger=False, dense_model="hash")
    with Workspace.open(tree, config) as ws:
        ws.index()
        got = ask_ours(ws, q, [2000])
    assert got["2000"]["primary_in"] and got["2000"]["file_cited"] and got["file@1"]
