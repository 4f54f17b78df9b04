"""Query parsing: cleaning issue text, the names it mentions, the places tools point at."""

from __future__ import annotations

from collections.abc import Collection
from typing import cast

from engine.retrieval import (
    Location,
    clean_query,
    locations,
    lone_name,
    query_identifiers,
    word_forms,
)
from indexers import Chunk


def test_clean_query_drops_template_comments_and_version_dumps() -> None:
    """HTML comments and an "installed versions" block go; the report around them stays."""
    text = (
        "<!-- Please fill this template -->\nThe parser fails on tabs.\n\n"
        "### Installed versions\nnumpy: 1.26.0\npytest 8.1.1\n\nIt worked in 7.0."
    )
    cleaned = clean_query(text)
    assert "template" not in cleaned and "numpy" not in cleaned and "8.1.1" not in cleaned
    assert "The parser fails on tabs." in cleaned and "It worked in 7.0." in cleaned


def test_clean_query_keeps_head_tail_and_frames_of_long_logs() -> None:
    """A fenced log past the limit keeps its head, its tail and the traceback frames."""
    lines = [f"noise line {i}" for i in range(40)]
    lines[20] = '  File "src/app/core.py", line 12, in handle'
    cleaned = clean_query("```\n" + "\n".join(lines) + "\n```")
    assert "noise line 0" in cleaned and "noise line 39" in cleaned
    assert 'File "src/app/core.py", line 12' in cleaned
    assert "noise line 19" not in cleaned


def test_identifiers_strongest_first_each_once() -> None:
    """Backticked names, calls, CamelCase, snake_case and dotted parts; stop words and names
    under three characters are left out."""
    text = "Calling `Session.register_hook` then parse_url(x) in HttpAdapter fails; os.path and the"
    names = query_identifiers(text)
    assert names[:3] == ["Session.register_hook", "Session", "register_hook"]
    assert {"parse_url", "HttpAdapter"} <= set(names)
    assert "os" not in names and "the" not in names
    assert len(names) == len(set(names))


def test_locations_from_tracebacks_test_ids_and_compilers() -> None:
    """Python frames, pytest ids, rustc arrows and path:line forms, in order, each once."""
    text = (
        'File "pkg/mod.py", line 7, in run\n'
        "FAILED tests/test_mod.py::TestRun::test_case[1] - AssertionError\n"
        "  --> src/lib.rs:42:5\n"
        "main.go:10: undefined: foo\n"
        "see pkg/mod.py again"
    )
    found = locations(text)
    assert found[0] == Location("pkg/mod.py", 7, "run")
    assert Location("tests/test_mod.py", None, "test_case") in found
    assert Location("src/lib.rs", 42) in found
    assert Location("main.go", 10) in found
    assert [loc.path for loc in found].count("pkg/mod.py") == 1


def test_locations_from_absolute_paths_and_ipython_frames() -> None:
    """A stack trace from the reporter's machine: absolute and home paths with a line (Node,
    Go, Rust panics), IPython's ``File path:line, in Class.func`` frames (one place each,
    named by the function); a path inside a URL is not a place."""
    text = (
        "File ~/env/lib/python3.10/site-packages/pkg/axes/_axes.py:2373, in Axes.bar(self, x)\n"
        "File /usr/lib/python3/site-packages/pkg/__init__.py:12, in _wrap.<locals>.inner(ax)\n"
        "    at render (/Users/me/app/lib/view.js:10:3)\n"
        "\t/tmp/sandbox/prog.go:8 +0x1d\n"
        "see https://github.com/org/repo/blob/main/src/x.py and https://host/a.py:12\n"
    )
    found = locations(text)
    assert found[:2] == [
        Location("~/env/lib/python3.10/site-packages/pkg/axes/_axes.py", 2373, "bar"),
        Location("/usr/lib/python3/site-packages/pkg/__init__.py", 12, "inner"),
    ]
    assert Location("/Users/me/app/lib/view.js", 10) in found
    assert Location("/tmp/sandbox/prog.go", 8) in found
    assert not any("x.py" in loc.path or "a.py" in loc.path for loc in found)
    assert len(found) == 4
    assert query_identifiers(text.split("\n")[0])[:1] == ["bar"]
    older = (
        "~/venv/lib/python3.8/site-packages/pkg/query_utils.py in __and__(self, other)\n"
        "C:\\envs\\lib\\site-packages\\pkg\\utils.py:84, in _execute(self)\n"
        "File C:\\envs\\lib\\site-packages\\pkg\\utils.py:84, in _execute(self)\n"
    )
    others = (
        "#0 /app/vendor/org/pkg/src/Db/Manager.php(168): Manager->connect()\n"
        "   at Shop.Cart.Total() in C:\\src\\Shop\\Cart.cs:line 42\n"
        "    at load (file:///home/me/app/src/loader.mjs:10:5)\n"
    )
    assert locations(others) == [
        Location("/app/vendor/org/pkg/src/Db/Manager.php", 168),
        Location("C:\\src\\Shop\\Cart.cs", 42),
        Location("/home/me/app/src/loader.mjs", 10),
    ]
    jvm_and_ruby = (
        "\tat com.acme.shop.Cart$Line.total(Cart.java:42)\n"
        "\tat com.acme.shop.Cart.lambda$sum$0(Cart.java:17)\n"
        "\tat java.base/java.util.ArrayList.forEach(ArrayList.java:1541)\n"
        "/app/lib/cart.rb:42:in `block in total'\n"
    )
    assert locations(jvm_and_ruby) == [
        Location("com/acme/shop/Cart.java", 42, "total", exact=True),
        Location("com/acme/shop/Cart.java", 17, exact=True),
        Location("java/util/ArrayList.java", 1541, "forEach", exact=True),
        Location("/app/lib/cart.rb", 42, "total"),
    ]
    loaders = "\tat app//org.junit.Assert.fail(Assert.java:89)\n\tat Main.main(Main.java:3)\n"
    assert locations(loaders) == [
        Location("org/junit/Assert.java", 89, "fail", exact=True),
        Location("Main.java", 3, "main"),
    ]
    assert locations(older) == [
        Location("C:\\envs\\lib\\site-packages\\pkg\\utils.py", 84, "_execute"),
        Location("~/venv/lib/python3.8/site-packages/pkg/query_utils.py", None, "__and__"),
    ]


def test_clean_query_keeps_ipython_frames_of_long_logs() -> None:
    """IPython's frames survive the shortening of a long log, as Python's do."""
    lines = [f"noise line {i}" for i in range(40)]
    lines[20] = "File ~/env/site-packages/pkg/core.py:12, in handle(x)"
    assert "pkg/core.py:12, in handle" in clean_query("```\n" + "\n".join(lines) + "\n```")


def test_short_questions_say_what_evidence_they_want() -> None:
    """A short question about tests, docs, examples or configuration says so; a long
    report that mentions a failing test still asks for the implementation."""
    from engine.retrieval import Intent, request_intents

    assert request_intents("where is the retry logic tested?") == {Intent.TESTS}
    assert request_intents("what do the docs say about plugins") == {Intent.DOCS}
    assert request_intents("is there an example of a custom loader") == {Intent.EXAMPLES}
    assert request_intents("which environment variable sets the timeout") == {Intent.CONFIG}
    assert request_intents("where is a path matched against ignore globs") == set()
    report = "When I run the test suite " + "the parser crashes on empty input " * 8
    assert request_intents(report) == set()
    assert request_intents("how do I switch the regex engine off again") == {Intent.USAGE}
    assert request_intents("is it safe to share a parser between threads") == {Intent.USAGE}
    assert request_intents("why does the parser crash on empty input") == set()
    # After the symptom, in its own clause; and a longer name before "should I".
    symptom = "My build fails because /tmp is noexec; how do I move the scratch files?"
    assert request_intents(symptom) == {Intent.USAGE}
    assert request_intents("which client IP middleware should I use") == {Intent.USAGE}
    assert request_intents("the parser knows how do I work") == set()  # not a clause start


def test_quoted_phrases_match_the_text_that_holds_them() -> None:
    """A quoted error message is found verbatim, also around a placeholder; short quotes
    (names) and apostrophes are not phrases."""
    from engine.retrieval import phrase_match, request_phrases

    phrases = request_phrases("Why do I get \"Got unexpected extra argument\" here? don't 'x'")
    assert phrases == (("got", "unexpected", "extra", "argument"),)
    source = 'ctx.fail(ngettext("Got unexpected extra argument ({args})", ...))'
    assert phrase_match(phrases, source) == 1.0
    assert phrase_match(phrases, "Got an unexpected argument") == 0.0
    half = request_phrases("`cannot be used as default recipe since it requires`")
    assert 0.5 < phrase_match(half, "cannot be used as default recipe since {n} requires") < 1
    assert request_phrases("the `parse_url` function") == ()


def test_word_forms_share_the_stem_and_skip_names_and_stop_words() -> None:
    """Plain words get their other spellings (same Snowball stem); identifiers, short
    words and stop words get none."""
    forms = word_forms("where is whitespace stripped when minifying, see parse_value or getName")
    assert "minify" in forms["minifying"] and "minified" in forms["minifying"]
    assert "strip" in forms["stripped"] and "stripped" not in forms["stripped"]
    assert not {"parse_value", "getName", "where", "when", "see"} & set(forms)
    assert "suggestion" in word_forms("suggest a recipe")["suggest"]


def test_a_foreign_path_is_cut_down_to_its_package_path_at_most() -> None:
    """A frame through an installed package may match this repository by the package's own
    path, never by a shorter tail (a third-party ``generic.py`` is not ours)."""
    from engine.retrieval._recall import _last_cut

    def tail(path: str) -> str:
        parts = path.split("/")
        return "/".join(parts[_last_cut(parts) :])

    assert tail("home/u/env/lib/python3.10/site-packages/pandas/core/generic.py") == (
        "pandas/core/generic.py"
    )
    assert tail("usr/lib/python3.6/unittest/case.py") == "unittest/case.py"
    assert tail("x/gems/fastlane-2.192.0/fastlane/lib/a.rb") == "fastlane/lib/a.rb"
    assert tail("r/index.crates.io-1ecc/axum-0.6.15/src/extract/m.rs") == "src/extract/m.rs"
    assert tail("go/pkg/mod/google.golang.org/grpc@v1.20.0/clientconn.go") == "clientconn.go"
    assert tail("app/node_modules/axios/lib/utils.js") == "lib/utils.js"
    assert tail("app/node_modules/@babel/core/lib/x.js") == "lib/x.js"
    assert tail("app/vendor/org/pkg/src/Db/Manager.php") == "Db/Manager.php"
    assert tail("Users/x/proj/src/lib/foo.js") == "foo.js"  # no package: the file name


def test_places_look_each_path_up_once_and_at_most_the_cap() -> None:
    """Frames naming one file cost one lookup; thousands of distinct paths cost
    MAX_PLACE_PATHS lookups, keeping the first and the last ones (a log's first error, a
    traceback's innermost frames)."""
    from engine.retrieval._recall import MAX_PLACE_PATHS, _signal_hits
    from tests.engine.records import chunk

    class Counting:
        def __init__(self) -> None:
            self.looked: list[str] = []

        def paths_like(self, suffix: str, limit: int = 20) -> list[str]:
            self.looked.append(suffix)
            return [suffix] if suffix.startswith("src/") else []

        def chunks_of(self, path: str) -> list[Chunk]:
            return [chunk(path, "def run():\n    pass\n" * 10, symbol="run")]

    view = Counting()
    same = [Location("src/app.py", line) for line in range(1, 200)]
    assert len(_signal_hits(view, same)) == 1  # type: ignore[arg-type]
    assert view.looked == ["src/app.py"]
    many = [Location(f"src/m{i}.py", 3) for i in range(1000)]
    view = Counting()
    hits = _signal_hits(view, many)  # type: ignore[arg-type]
    half = MAX_PLACE_PATHS // 2
    assert len(view.looked) == MAX_PLACE_PATHS == len(hits)
    assert view.looked[:half] == [f"src/m{i}.py" for i in range(half)]
    assert view.looked[-1] == "src/m999.py"


def test_cochange_candidates_come_from_the_partners_of_the_best_files() -> None:
    """The files that changed with the best files, and hold no candidate yet, are searched
    restricted to them: their best sections, strongest partner first, as candidates."""
    from engine.core import RecallSettings
    from engine.retrieval import cochange_candidates
    from overlays import ChangeHistory, Found, View
    from tests.engine.records import chunk

    history = ChangeHistory.of([["core.c", "core.h"]] * 3 + [["core.c", "util.c"]] * 2
                               + [["core.c", "weak.c"]] + [["weak.c"]] * 5
                               + [["side.c", "other.c"]] * 2)  # fmt: skip

    class Fake:
        def __init__(self) -> None:
            self.asked: list[list[str]] = []

        def neighbours(
            self, path: str, min_share: float, limit: int, exclude: Collection[str] = ()
        ) -> list[tuple[str, float]]:
            return history.neighbours(path, min_share, limit, exclude)

        def search_sections(self, query: str, k: int, *, paths: list[str]) -> list[Found]:
            self.asked.append(list(paths))
            return [Found(f"{p}#{i}", p, 1.0 - i / 10) for p in paths for i in range(3)]

        def chunks(self, ids: list[str]) -> dict[str, Chunk]:
            return {i: chunk(i.split("#")[0], f"int f{i[-1]}(void);") for i in ids}

    fake = Fake()
    view = cast("View", fake)
    settings = RecallSettings(cochange_from=2, cochange_share=0.2, cochange_sections=2)
    have = {"core.c", "util.c", "side.c"}
    found = cochange_candidates(view, "core", ["core.c", "util.c", "side.c"], have, settings)
    assert fake.asked == [["core.h"]]  # util.c is a candidate; weak.c is under the share;
    assert [(c.chunk.path, c.ranks) for c in found] == [  # side.c is not among the best 2
        ("core.h", {"cochange": 1}), ("core.h", {"cochange": 2})]  # fmt: skip
    assert found[0].fused > found[1].fused > 0
    assert [c.chunk.path for c in cochange_candidates(
        view, "core", ["side.c"], have, settings)] == ["other.c", "other.c"]  # fmt: skip
    assert cochange_candidates(view, "core", ["weak.c"], have, settings) == []


def test_a_built_javascript_frame_finds_the_source_it_was_built_from() -> None:
    """A frame in a package's built file (``node_modules/dayjs/plugin/utc.js``, made from
    ``src/plugin/utc/index.js``; ``dist/core/x.js`` from ``src/core/x.ts``) finds that
    source when the built path itself is not here; a third-party ``dist/index.js`` is never
    read as any ``index.ts``."""
    from engine.retrieval._recall import _indexed

    class Paths:
        def __init__(self, *paths: str) -> None:
            self.paths = paths

        def paths_like(self, suffix: str, limit: int = 20) -> list[str]:
            return [p for p in self.paths if p == suffix or p.endswith("/" + suffix)]

    view = Paths("src/plugin/utc/index.js", "src/core/x.ts", "src/index.ts", "lib/utils.js")
    frame = "home/ci/project/node_modules/dayjs/plugin/utc.js"
    assert _indexed(view, frame, exact=False) == ["src/plugin/utc/index.js"]  # type: ignore[arg-type]
    assert _indexed(view, "app/node_modules/pkg/dist/core/x.js", exact=False) == [  # type: ignore[arg-type]
        "src/core/x.ts"
    ]
    assert _indexed(view, "app/node_modules/pkg/dist/index.js", exact=False) == []  # type: ignore[arg-type]
    assert _indexed(view, "app/node_modules/axios/lib/utils.js", exact=False) == [  # type: ignore[arg-type]
        "lib/utils.js"
    ]
    assert _indexed(view, "app/node_modules/pkg/plugin/utc.py", exact=False) == []  # type: ignore[arg-type]
    assert _indexed(view, "node_modules/dayjs/plugin/utc.js", exact=True) == []  # type: ignore[arg-type]


def test_a_request_of_one_word_is_a_name_too() -> None:
    """`configure` alone was a plain word for BM25, and sections that used the word ranked
    above the method of that name; a lone word that could name code is now a name."""
    assert lone_name("configure") == "configure"
    assert lone_name("  `parse_args` ") == "parse_args"
    for text in ("configure the server", "the", "id", "42", "a.b", "fix #12", ""):
        assert lone_name(text) is None, text
