"""The names a definition defines: its own (through C-style declarators, templates,
operators, and the macros a grammar reads into a declarator) and, for a module-level
statement, the names it declares (``x = …``, ``export const X = …``, ``#define``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

__all__ = [
    "IDENTIFIER_TYPES",
    "clean_name",
    "declared_names",
    "definition_name",
    "first_type_name",
    "node_text",
]

IDENTIFIER_TYPES = frozenset(
    {
        "identifier",
        "type_identifier",
        "field_identifier",
        "property_identifier",
        "constant",
        "namespace_identifier",
        "qualified_identifier",
        "scoped_identifier",
        "scoped_type_identifier",
        "operator_name",
        "destructor_name",
        "package_identifier",
        "private_property_identifier",  # JS/TS `#render`
        "name",  # PHP
        "simple_identifier",  # Swift
    }
)
# Built-in types an impl can be for (Rust `impl Summary for bool`, `for ()`): its name.
_BUILTIN_TYPES = frozenset({"primitive_type", "unit_type"})
# C and C++ declarators that wrap the declarator holding the name without a field.
_INNER_DECLARATORS = frozenset(
    {
        "reference_declarator",  # `int& x()`
        "parenthesized_declarator",  # `(*handler_fn)`, `(*signal(int))`
        "function_declarator",
        "pointer_declarator",
        "array_declarator",
    }
)
# Nodes followed from a definition to its name: `void (*signal(int, void (*)(int)))(int)`
# takes six; the bound only stops a pathological nesting.
_MAX_NAME_DEPTH = 16
# Fields and node types followed to find the names a module-level statement defines.
_NAME_FIELDS = ("name", "left", "declarator", "bound_identifier", "property")
_DECLARING_CHILDREN = frozenset(
    {
        "assignment",
        "expression_statement",
        "variable_declarator",
        "init_declarator",
        "const_spec",
        "var_spec",
        "type_spec",
        "pattern_list",
        "tuple_pattern",
        "pointer_declarator",
        "array_declarator",
        "reference_declarator",  # C++ `int& counter();`
        "parenthesized_declarator",  # C `void (*handlers[4])(int);`
        "function_declarator",
        "variable_declaration",  # C#, Kotlin
        "lexical_declaration",  # JS/TS `export const X = ...` (inside an export statement)
        "assignment_expression",  # JS `exports.parse = ...`, PHP `$handler = ...`
        "var_spec_list",  # Go `var ( A = ...; B = ... )`
        "const_element",  # PHP
        "property_element",  # PHP
        "variable_name",  # PHP
    }
)
# Nodes whose identifier children (other than a type) are the names they declare.
_NAME_LISTS = frozenset(
    {"pattern_list", "tuple_pattern", "variable_declaration", "const_element", "variable_name"}
)


def node_text(node: tree_sitter.Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def clean_name(raw: str) -> str:
    # `Foo<T>` -> `Foo`, `ns::Foo` -> `ns.Foo`, whitespace out; an operator keeps its
    # symbol (`operator<`, `operator<<` and `operator<=` are three names).
    head, keyword, symbol = raw.partition("operator")
    if keyword and (not head or head.endswith("::")) and not symbol[:1].isidentifier():
        return clean_name(head[:-2]) + "." * bool(head) + keyword + "".join(symbol.split())
    # Words before the name are macros the grammar took for part of it (simdjson's
    # `SIMDJSON_DISABLE_… simdjson_inline error_code json_iterator::skip_child`): the name
    # is the last word.
    words = re.sub(r"\s*::\s*", "::", raw.split("<", 1)[0]).split()
    return words[-1].replace("::", ".") if words else ""


def definition_name(node: tree_sitter.Node | None) -> str:
    """The defined name of a definition node, through C-style declarators if needed."""
    seen = 0
    while node is not None and seen < _MAX_NAME_DEPTH:
        seen += 1
        if node.type in IDENTIFIER_TYPES:
            return clean_name(node_text(node))
        if node.type in _BUILTIN_TYPES:  # Rust `impl FromValue for bool`
            return node_text(node)
        if node.type == "operator_cast":  # C++ `explicit operator bool()`
            return f"operator {clean_name(node_text(node.child_by_field_name('type')))}"
        found = (
            node.child_by_field_name("name")
            or node.child_by_field_name("declarator")
            or node.child_by_field_name("type")  # Rust `impl Type`, `impl X for &str`
            or node.child_by_field_name("element")  # Rust `impl X for [u8]`
        )
        if found is None:
            # Swift `extension Invoice`: the name is a type node's identifier. C's `&` and
            # `(*…)` declarators (`int& x()`, `typedef void (*handler)(int)`) hold the inner
            # declarator as an unnamed child.
            children = node.named_children
            name = next((c for c in children if c.type in IDENTIFIER_TYPES), None)
            if name is not None:
                return clean_name(node_text(name))
            found = next((c for c in children if c.type in _INNER_DECLARATORS), None)
        node = found
    return ""


def first_type_name(node: tree_sitter.Node | None) -> str:
    """First type identifier below ``node`` (a Go receiver ``(c *Circle)`` -> ``Circle``)."""
    if node is None:
        return ""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return node_text(current)
        stack.extend(reversed(current.named_children))
    return ""


def declared_names(node: tree_sitter.Node, depth: int = 0) -> list[str]:
    """Names a module-level statement defines (assignments, constants, declarators)."""
    if depth > 4:
        return []
    names: list[str] = []
    for field_name in _NAME_FIELDS:
        child = node.child_by_field_name(field_name)
        if child is None:
            continue
        if child.type in IDENTIFIER_TYPES:
            names.append(clean_name(node_text(child)))
        else:
            names.extend(declared_names(child, depth + 1))
    if not names:
        for i, child in enumerate(node.children):
            if not child.is_named or node.field_name_for_child(i) == "type":  # C# `Foo x;`
                continue
            if child.type in IDENTIFIER_TYPES and node.type in _NAME_LISTS:
                names.append(node_text(child))
            elif child.type in _DECLARING_CHILDREN:
                names.extend(declared_names(child, depth + 1))
    return [n for n in names if n]
