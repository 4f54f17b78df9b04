"""The tree-sitter chunker: functions, classes and methods as sections, never a line lost.

How a file becomes sections:

* Top-level definitions (functions, classes, types) are sections of their own; comments and
  attributes right above a definition belong to it. Runs of other top-level code (imports,
  constants, ``if __name__ …``) between definitions become ``module`` sections.
* A container (class, impl, trait, namespace) yields a section for its header and non-method
  members, and one section per method, each carrying the class header as ``context``. The
  container's closing lines join its last section, so every line stays covered.
* Sections that share a line (``function a(){…} function b(){…}`` on one line) are merged
  into one with all their names: lines are never cut, so no line is in two sections.
* A section over ``max_tokens`` is split where its children begin (statements, members;
  ``_sizing.py``), recursing into children that are too large; never mid-line or dropped.
* Syntax errors: tree-sitter recovers, and ``ERROR`` nodes are read through like any other
  code, so one broken function does not lose its neighbours. Lines no section covers (bytes
  an ``ERROR`` skipped, which none of its children hold) become module sections: whatever
  the parse, every non-blank line lands in one. A file with no grammar falls back to
  overlapping line windows.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from indexers._chunk import ChunkKind, DocType
from indexers._draft import Draft
from indexers._languages import GrammarNotInstalledError, Language, grammar
from indexers._names import (
    declared_names,
    definition_name,
    first_type_name,
    node_text,
)
from indexers._recover import recovered
from indexers._sizing import Candidate, Sizer, lines_of
from indexers._syntax import Syntax, syntax_for
from indexers._text import SourceText
from indexers._tokens import TokenCounter
from indexers._windows import line_windows

if TYPE_CHECKING:
    import tree_sitter

__all__ = ["code_drafts", "is_header_file", "window_drafts"]

_MAX_HEADER_LINES = 3  # a class header shown as context; long signatures are cut after this
_local = threading.local()


def _parser(language: Language) -> tree_sitter.Parser:
    """A parser per thread and language: tree-sitter parsers are not thread-safe."""
    cache: dict[str, tree_sitter.Parser] | None = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    parser = cache.get(language.name)
    if parser is None:
        import tree_sitter

        parser = cache[language.name] = tree_sitter.Parser(grammar(language))
    return parser


def is_header_file(path: str, language: Language) -> bool:
    """Whether ``path`` only declares (``.h``, ``.pyi``, ``.d.ts``): its sections define."""
    syntax = syntax_for(language.name)
    name = posixpath.basename(path).lower()
    return syntax is not None and any(name.endswith(ext) for ext in syntax.header_extensions)


@dataclass(frozen=True, slots=True)
class _Definition:
    outer: tree_sitter.Node  # span (wrapper included: decorators, export, template)
    inner: tree_sitter.Node  # the definition itself
    kind: ChunkKind
    name: str
    body: tree_sitter.Node | None  # members, for containers


class _Chunker:
    """Finds one file's sections (``Candidate``s) in its syntax tree; ``Sizer`` fits them
    to the token budget."""

    def __init__(self, src: SourceText, syntax: Syntax) -> None:
        self.src = src
        self.syntax = syntax

    # -- classification -------------------------------------------------------------

    def _flatten(self, nodes: Iterable[tree_sitter.Node]) -> Iterator[tree_sitter.Node]:
        """``nodes`` in order, each ``ERROR`` or transparent one replaced by its children
        (a stack of iterators, not recursion: error recovery can nest without bound)."""
        stack = [iter(nodes)]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
            elif node.type == "ERROR" or node.type in self.syntax.transparent:
                stack.append(iter(node.children))
            else:
                yield node

    def _definition(self, node: tree_sitter.Node) -> _Definition | None:
        syntax = self.syntax
        kind_name = node.type
        if kind_name in syntax.wrappers:
            field_name = syntax.wrappers[kind_name]
            if field_name:
                inner = node.child_by_field_name(field_name)
            else:
                named = [c for c in node.named_children if c.type not in syntax.comments]
                inner = named[-1] if named else None
            found = self._definition(inner) if inner is not None else None
            if found is None:
                return None
            return _Definition(node, found.inner, found.kind, found.name, found.body)
        if kind_name in syntax.functions:
            if kind_name == "method_declaration" and node.child_by_field_name("receiver"):
                receiver = first_type_name(node.child_by_field_name("receiver"))
                name = definition_name(node)
                return _Definition(node, node, ChunkKind.METHOD, _join(receiver, name), None)
            return _Definition(node, node, ChunkKind.FUNCTION, self._name(node), None)
        if kind_name in syntax.containers:
            kind, body_field = syntax.containers[kind_name]
            body = node.child_by_field_name(body_field) or next(
                (c for c in node.named_children if c.type in syntax.member_lists), None
            )
            return _Definition(node, node, kind, self._name(node), body)
        if kind_name in syntax.types:
            if kind_name == "type_declaration":  # Go: the name is on the spec
                spec = next((c for c in node.named_children if c.type.startswith("type_")), None)
                spec_name = definition_name(spec) if spec else ""
                return _Definition(node, node, ChunkKind.TYPE, spec_name, None)
            return _Definition(node, node, ChunkKind.TYPE, definition_name(node), None)
        if kind_name in syntax.variable_declarations:
            declarators = [c for c in node.named_children if c.type == "variable_declarator"]
            if len(declarators) == 1:
                value = declarators[0].child_by_field_name("value")
                if value is not None and value.type in syntax.function_values:
                    var_name = definition_name(declarators[0])
                    return _Definition(node, node, ChunkKind.FUNCTION, var_name, None)
        if kind_name in syntax.function_fields:  # `#onClick = (e) => {…}` in a class body
            value = node.child_by_field_name("value")
            if value is not None and value.type in syntax.function_values:
                key = node.child_by_field_name("name") or node.child_by_field_name("property")
                return _Definition(node, node, ChunkKind.FUNCTION, definition_name(key), None)
        return None

    def _name(self, node: tree_sitter.Node) -> str:
        """A definition's name, or the language's fixed name for one the grammar leaves
        unnamed (Swift ``init``, whose ``name`` fields, if any, belong to its parameters)."""
        return self.syntax.implicit_names.get(node.type) or definition_name(node)

    # -- structure ------------------------------------------------------------------

    def scope(
        self,
        items: Iterable[tree_sitter.Node],
        prefix: str,
        depth: int,
        context: str,
        own_kind: ChunkKind,
        in_class: bool,
    ) -> list[Candidate]:
        """Sections for one scope (the module, or a container's members), in line order."""
        out: list[Candidate] = []
        gap: list[tree_sitter.Node] = []
        pending: list[tree_sitter.Node] = []  # comments that may belong to the next definition
        prev_end = 0
        for node in self._flatten(items):
            found = self._definition(node)
            if found is None:
                # A comment after code on its line (`TIMEOUT = 30  # seconds`) is that
                # code's; only one that starts its line may lead the next definition.
                if self._leads(node):
                    pending.append(node)
                else:
                    gap.extend(pending)
                    pending = []
                    gap.append(node)
                continue
            start, end = lines_of(found.outer)
            attached: list[tree_sitter.Node] = []
            while pending and lines_of(pending[-1])[1] >= start - 1:
                comment = pending.pop()
                attached.insert(0, comment)
                start = min(start, lines_of(comment)[0])
            gap.extend(pending)
            pending = []
            if gap:
                out.extend(self._gap(gap, prefix, depth, context, own_kind, prev_end, start, end))
                gap = []
            defined = self._define(found, start, attached, prefix, depth, context, in_class)
            if self._is_test(found, attached):  # and so is everything inside it
                for cand in defined:
                    cand.test = True
            out.extend(defined)
            prev_end = max(prev_end, end)
        gap.extend(pending)
        if gap:
            out.extend(self._gap(gap, prefix, depth, context, own_kind, prev_end, 0, 0))
        return out

    def _leads(self, node: tree_sitter.Node) -> bool:
        """Whether ``node`` is a comment or attribute with nothing before it on its line."""
        syntax = self.syntax
        if node.type not in syntax.comments and node.type not in syntax.attributes:
            return False
        data = self.src.data
        return not data[data.rfind(b"\n", 0, node.start_byte) + 1 : node.start_byte].strip()

    def _is_test(self, found: _Definition, attached: list[tree_sitter.Node]) -> bool:
        """Whether a definition is a test beside the code: an attribute above it says so,
        or it is a module the language's convention names for tests."""
        syntax = self.syntax
        if found.kind is ChunkKind.MODULE and found.name in syntax.test_modules:
            return True
        mark = syntax.test_attribute
        return mark is not None and any(
            node.type in syntax.attributes and mark.match(node_text(node)) for node in attached
        )

    def _gap(
        self,
        nodes: list[tree_sitter.Node],
        prefix: str,
        depth: int,
        context: str,
        kind: ChunkKind,
        prev_end: int,
        next_start: int,
        next_end: int,
    ) -> list[Candidate]:
        # Drop nodes whose lines a neighbouring definition already covers (`};`, `} else`).
        kept = []
        for node in nodes:
            start, end = lines_of(node)
            if end <= prev_end or (next_start and start >= next_start and end <= next_end):
                continue
            kept.append(node)
        if not kept:
            return []
        start = min(lines_of(n)[0] for n in kept)
        end = max(lines_of(n)[1] for n in kept)
        affixes = self.syntax.name_affixes
        defines = _names(
            (name.strip(affixes), lines_of(n)[0]) for n in kept for name in declared_names(n)
        )
        return [Candidate(start, end, kind, prefix, context, depth, defines, kept)]

    def _define(
        self,
        found: _Definition,
        start: int,
        attached: list[tree_sitter.Node],
        prefix: str,
        depth: int,
        context: str,
        in_class: bool,
    ) -> list[Candidate]:
        end = lines_of(found.outer)[1]
        symbol = _join(prefix, found.name)
        kind = found.kind
        if kind is ChunkKind.FUNCTION and in_class:
            kind = ChunkKind.METHOD
        # A query names `#render` or `paid?` as `render`, `paid`: that is what is defined.
        short = found.name.rsplit(".", 1)[-1].strip(self.syntax.name_affixes)
        first = lines_of(found.inner)[0]
        defines = ((short, first),) if short else ()
        signature = self.src.lines[first - 1].strip()
        members = self._members(found)
        if not members:
            units = [*attached, found.outer]
            return [Candidate(start, end, kind, symbol, context, depth, defines, units, signature)]
        header = self._header(found)
        inner_context = f"{context}\n{header}" if context else header
        subs = self.scope(
            members, symbol, depth + 1, inner_context, kind, in_class=kind is ChunkKind.CLASS
        )
        if subs[0].kind is kind and subs[0].symbol == symbol:
            subs[0].start = start  # the header joins the first run of non-method members
            subs[0].units[:0] = attached
            subs[0].context = context
            subs[0].depth = depth
            subs[0].defines = _names((*defines, *subs[0].defines))
        else:  # a header sharing its first member's line (`class K { m() {…} }`) merges later
            head_end = max(start, subs[0].start - 1)
            subs.insert(0, Candidate(start, head_end, kind, symbol, context, depth, defines))
        # Closing lines (`}`, `};`) belong to the last member section.
        last = max(subs, key=lambda c: c.end)
        last.end = max(last.end, end)
        return subs

    def _members(self, found: _Definition) -> list[tree_sitter.Node]:
        """A container's member nodes, if any of them is a definition (else it stays whole)."""
        if found.body is None:
            return []
        members = list(found.body.named_children)
        if any(self._definition(m) is not None for m in self._flatten(members)):
            return members
        return []

    def _header(self, found: _Definition) -> str:
        """The container's header lines (``class A(B):``, ``impl X for Y {``)."""
        first = lines_of(found.inner)[0]
        assert found.body is not None
        body_first = lines_of(found.body)[0]
        body_text = found.body.text or b""
        last = body_first if body_text[:1] == b"{" else body_first - 1
        if last > first and self.src.lines[last - 1].strip() == "{":
            last -= 1  # a brace on a line of its own says nothing
        last = min(max(first, last), first + _MAX_HEADER_LINES - 1)
        return "\n".join(line.rstrip() for line in self.src.lines[first - 1 : last])


def _join(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return f"{prefix}.{name}" if name else prefix


def _names(pairs: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """Names with their lines, each name once (where it is first declared)."""
    first: dict[str, int] = {}
    for name, line in pairs:
        first.setdefault(name, line)
    return tuple(first.items())


def window_drafts(
    src: SourceText,
    *,
    max_tokens: int,
    overlap_lines: int,
    counter: TokenCounter,
) -> list[Draft]:
    """Overlapping line windows over the whole file (no grammar, or parsing failed)."""
    windows = line_windows(src, 1, src.line_count, max_tokens, overlap_lines, counter)
    return [Draft(a, b, ChunkKind.WINDOW) for a, b in windows]


def code_drafts(
    src: SourceText,
    language: Language,
    *,
    max_tokens: int,
    overlap_lines: int,
    counter: TokenCounter,
    doc_type: DocType | None = None,
) -> list[Draft]:
    """Sections of a source file; windows when the language has no usable grammar.

    ``doc_type`` forces the doc type of every section (a test file's sections are tests);
    None lets class and type sections be definitions and the rest implementations.
    """
    syntax = syntax_for(language.name)
    if syntax is None or src.line_count == 0:
        return window_drafts(
            src, max_tokens=max_tokens, overlap_lines=overlap_lines, counter=counter
        )
    try:
        tree = recovered(_parser(language), src.data)
    except (GrammarNotInstalledError, ValueError, RuntimeError):
        return window_drafts(
            src, max_tokens=max_tokens, overlap_lines=overlap_lines, counter=counter
        )
    # Definitions nested past Python's stack raise RecursionError here: ``chunk_file`` cuts
    # that file (like any file whose chunker fails) into line windows and says so.
    chunker = _Chunker(src, syntax)
    candidates = chunker.scope(tree.root_node.children, "", 0, "", ChunkKind.MODULE,
                               in_class=False)  # fmt: skip
    candidates = _merge_shared_lines(candidates)
    candidates.extend(_uncovered(src, candidates))
    return Sizer(src, max_tokens, counter).drafts(candidates, doc_type)


def _merge_shared_lines(candidates: list[Candidate]) -> list[Candidate]:
    """Sections that share a line become one: lines are never cut, so each would hold the
    whole shared line (400 functions on one line of a bundle were 400 copies of it)."""
    out: list[Candidate] = []
    group: list[Candidate] = []
    for cand in sorted(candidates, key=lambda c: (c.start, c.end)):
        if group and cand.start <= max(c.end for c in group):
            group.append(cand)
            continue
        if group:
            out.append(_merged(group))
        group = [cand]
    if group:
        out.append(_merged(group))
    return out


def _merged(group: list[Candidate]) -> Candidate:
    """One section over ``group``: named and placed as its outermost definition (the first
    one; a module run only when there is no definition), defining all their names."""
    if len(group) == 1:
        return group[0]
    lead = min(group, key=lambda c: (c.depth, c.kind is ChunkKind.MODULE))
    return Candidate(
        min(c.start for c in group),
        max(c.end for c in group),
        lead.kind,
        lead.symbol,
        lead.context,
        lead.depth,
        _names(pair for c in group for pair in c.defines),
        [unit for c in group for unit in c.units],
        lead.signature,
        test=all(c.test for c in group),
    )


def _uncovered(src: SourceText, candidates: list[Candidate]) -> list[Candidate]:
    """Module sections for the lines no section covers: an ``ERROR`` node can span bytes
    none of its children hold (tree-sitter skipped them to recover), and those lines must
    still land in a chunk, whatever the grammar made of them."""
    covered = bytearray(src.line_count + 2)
    for cand in candidates:
        for line in range(cand.start, min(cand.end, src.line_count) + 1):
            covered[line] = 1
    out: list[Candidate] = []
    line = 1
    while line <= src.line_count:
        if covered[line] or src.is_blank(line):
            line += 1
            continue
        end = line
        while end < src.line_count and not covered[end + 1]:
            end += 1
        out.append(Candidate(line, end, ChunkKind.MODULE, "", "", 0, ()))
        line = end + 1
    return out
