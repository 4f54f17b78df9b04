"""Per-language node types: what is a definition, a container, a comment, a wrapper.

The chunker in ``_code.py`` is generic; everything it knows about a grammar is here, in one
table per language, so adding a language is adding a table (and a golden fixture).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from indexers._chunk import ChunkKind

__all__ = ["Syntax", "syntax_for"]


@dataclass(frozen=True, slots=True)
class Syntax:
    """What the chunker needs to know about one grammar's node types."""

    functions: frozenset[str]
    # container node type -> (kind of its own sections, field holding its members)
    containers: dict[str, tuple[ChunkKind, str]] = field(default_factory=dict)
    types: frozenset[str] = frozenset()  # type-only declarations, kept whole
    # wrapper node type -> field of the wrapped definition ("" = first named child)
    wrappers: dict[str, str] = field(default_factory=dict)
    comments: frozenset[str] = frozenset()  # attach to the definition right below them
    attributes: frozenset[str] = frozenset()  # likewise (Rust #[...] items)
    transparent: frozenset[str] = frozenset()  # their children count as siblings
    # node types whose variable declarators define a function when the value is one
    variable_declarations: frozenset[str] = frozenset()
    function_values: frozenset[str] = frozenset()
    # class fields (field "value") that define a method when the value is a function
    function_fields: frozenset[str] = frozenset()
    header_extensions: tuple[str, ...] = ()  # files that only declare (doc_type definition)
    # node types holding a container's members where the grammar gives them no field
    member_lists: frozenset[str] = frozenset()
    # names of definitions the grammar never names (Swift `init`)
    implicit_names: dict[str, str] = field(default_factory=dict)
    # characters around a defined name that a query leaves out (`#render`, `paid?`)
    name_affixes: str = ""
    # Tests that live beside the code in a source file: an attribute that marks the
    # definition below it as a test (Rust `#[test]`, `#[cfg(test)] mod tests`), and module
    # names that hold tests. Their sections are tests, as a test file's are.
    test_attribute: re.Pattern[str] | None = None
    test_modules: frozenset[str] = frozenset()


_JS = Syntax(
    functions=frozenset(
        {"function_declaration", "generator_function_declaration", "method_definition"}
    ),
    containers={
        "class_declaration": (ChunkKind.CLASS, "body"),
        "class": (ChunkKind.CLASS, "body"),
    },
    wrappers={"export_statement": "declaration"},
    comments=frozenset({"comment"}),
    variable_declarations=frozenset({"lexical_declaration", "variable_declaration"}),
    function_values=frozenset(
        {"arrow_function", "function_expression", "function", "generator_function"}
    ),
    function_fields=frozenset({"field_definition", "public_field_definition"}),
    name_affixes="#",
)
_TS = replace(
    _JS,
    functions=_JS.functions
    | {"function_signature", "abstract_method_signature", "method_signature"},
    containers={
        **_JS.containers,
        "abstract_class_declaration": (ChunkKind.CLASS, "body"),
        "internal_module": (ChunkKind.MODULE, "body"),
        "module": (ChunkKind.MODULE, "body"),
    },
    types=frozenset({"interface_declaration", "type_alias_declaration", "enum_declaration"}),
    # `namespace X {}` parses as an expression statement around the module.
    wrappers={**_JS.wrappers, "ambient_declaration": "", "expression_statement": ""},
    header_extensions=(".d.ts",),
)
_C_TRANSPARENT = frozenset(
    {"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
)

_KOTLIN_CLASSES = ("class_declaration", "object_declaration", "companion_object")
_SWIFT_CONTAINERS = ("class_declaration", "protocol_declaration")  # class covers struct, enum,
# extension and actor

_SYNTAX: dict[str, Syntax] = {
    "python": Syntax(
        functions=frozenset({"function_definition"}),
        containers={"class_definition": (ChunkKind.CLASS, "body")},
        wrappers={"decorated_definition": "definition"},
        comments=frozenset({"comment"}),
        header_extensions=(".pyi",),
    ),
    "javascript": _JS,
    "typescript": _TS,
    "tsx": _TS,
    "go": Syntax(
        functions=frozenset({"function_declaration", "method_declaration"}),
        types=frozenset({"type_declaration"}),
        comments=frozenset({"comment"}),
    ),
    "rust": Syntax(
        functions=frozenset({"function_item", "function_signature_item", "macro_definition"}),
        containers={
            "impl_item": (ChunkKind.CLASS, "body"),
            "trait_item": (ChunkKind.CLASS, "body"),
            "mod_item": (ChunkKind.MODULE, "body"),
        },
        types=frozenset({"struct_item", "enum_item", "union_item", "type_item"}),
        comments=frozenset({"line_comment", "block_comment"}),
        attributes=frozenset({"attribute_item"}),
        # `#[test]`, `#[tokio::test]`, `#[cfg(test)]`, and the test-case macros' own.
        test_attribute=re.compile(
            r"#\[\s*(?:cfg\(\s*test\s*\)|(?:\w+::)*test\b|rstest\b|test_case\b|bench\b)"
        ),
        test_modules=frozenset({"tests"}),
    ),
    "java": Syntax(
        functions=frozenset(
            {"method_declaration", "constructor_declaration", "compact_constructor_declaration"}
        ),
        containers={
            kind: (ChunkKind.CLASS, "body")
            for kind in (
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
            )
        },
        comments=frozenset({"line_comment", "block_comment"}),
        # An enum's methods and constructors follow its constants in this node.
        transparent=frozenset({"enum_body_declarations"}),
    ),
    "c": Syntax(
        functions=frozenset({"function_definition"}),
        types=frozenset(
            {"struct_specifier", "union_specifier", "enum_specifier", "type_definition"}
        ),
        comments=frozenset({"comment"}),
        transparent=_C_TRANSPARENT,
        header_extensions=(".h",),
    ),
    "cpp": Syntax(
        functions=frozenset({"function_definition"}),
        containers={
            "class_specifier": (ChunkKind.CLASS, "body"),
            "struct_specifier": (ChunkKind.CLASS, "body"),
            "namespace_definition": (ChunkKind.MODULE, "body"),
        },
        types=frozenset(
            {
                "union_specifier",
                "enum_specifier",
                "type_definition",
                "alias_declaration",
                "concept_definition",
            }
        ),
        # `friend bool operator==(…) {…}`: a function defined in the class, by name.
        wrappers={"template_declaration": "", "friend_declaration": ""},
        comments=frozenset({"comment"}),
        transparent=_C_TRANSPARENT | {"linkage_specification", "declaration_list"},
        header_extensions=(".h", ".hh", ".hpp", ".hxx", ".h++"),
    ),
    "php": Syntax(
        functions=frozenset({"function_definition", "method_declaration"}),
        containers={
            kind: (ChunkKind.CLASS, "body")
            for kind in (
                "class_declaration",
                "interface_declaration",
                "trait_declaration",
                "enum_declaration",
            )
        },
        comments=frozenset({"comment"}),
        # `namespace A { … }`: its declarations are the file's; `namespace A;` is a statement.
        transparent=frozenset({"namespace_definition", "compound_statement"}),
    ),
    "ruby": Syntax(
        functions=frozenset({"method", "singleton_method"}),
        containers={
            "class": (ChunkKind.CLASS, "body"),
            "singleton_class": (ChunkKind.CLASS, "body"),
            "module": (ChunkKind.MODULE, "body"),
        },
        comments=frozenset({"comment"}),
        name_affixes="?!=",
    ),
    "csharp": Syntax(
        functions=frozenset(
            {
                "method_declaration",
                "constructor_declaration",
                "destructor_declaration",
                "operator_declaration",
                "conversion_operator_declaration",
                "local_function_statement",
            }
        ),
        containers={
            "class_declaration": (ChunkKind.CLASS, "body"),
            "struct_declaration": (ChunkKind.CLASS, "body"),
            "interface_declaration": (ChunkKind.CLASS, "body"),
            "record_declaration": (ChunkKind.CLASS, "body"),
            "namespace_declaration": (ChunkKind.MODULE, "body"),
        },
        types=frozenset({"enum_declaration", "delegate_declaration"}),
        wrappers={"global_statement": ""},  # top-level statements (C# 9)
        comments=frozenset({"comment"}),
        attributes=frozenset({"attribute_list"}),
        implicit_names={
            "operator_declaration": "operator",
            "conversion_operator_declaration": "operator",
        },
    ),
    "kotlin": Syntax(
        functions=frozenset({"function_declaration", "secondary_constructor"}),
        containers={kind: (ChunkKind.CLASS, "body") for kind in _KOTLIN_CLASSES},
        types=frozenset({"type_alias"}),
        comments=frozenset({"line_comment", "block_comment"}),
        member_lists=frozenset({"class_body", "enum_class_body"}),
        implicit_names={"secondary_constructor": "constructor"},
    ),
    "swift": Syntax(
        functions=frozenset(
            {
                "function_declaration",
                "protocol_function_declaration",
                "init_declaration",
                "deinit_declaration",
                "subscript_declaration",
            }
        ),
        containers={kind: (ChunkKind.CLASS, "body") for kind in _SWIFT_CONTAINERS},
        types=frozenset({"typealias_declaration"}),
        comments=frozenset({"comment", "multiline_comment"}),
        implicit_names={
            "init_declaration": "init",
            "deinit_declaration": "deinit",
            "subscript_declaration": "subscript",
        },
    ),
}


def syntax_for(language: str) -> Syntax | None:
    """The node-type table for ``language``, or None when it has none."""
    return _SYNTAX.get(language)
