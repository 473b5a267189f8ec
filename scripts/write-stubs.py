#!/usr/bin/python3
"""Writes the keyword part of the type stubs (python/filkit/__init__.pyi) from the library's one
declaration of each option (filkit._keywords: name, default and annotation, from visit_fields).

For every function and constructor that takes its options as keywords, the stub keeps what is
written by hand (the explicit parameters before the keywords, the return type) and gets its
keywords, their types and defaults, from the running module; nothing else in the stubs changes.

    /usr/bin/python3 scripts/write-stubs.py           rewrite the stubs
    /usr/bin/python3 scripts/write-stubs.py --check   exit 1 if they differ from the declaration
                                                     (python/tests/test_vocabulary.py runs this)
"""
import argparse
import ast
import difflib
import os
import sys

import filkit

STUBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python", "filkit", "__init__.pyi")
WIDTH = 120


def default_text(value, annotation):
    """A default as the stubs spell it: literals as written; '...' for anything mutable, for a
    non-finite number (the library's "inf") and for a size (max_memory: the machine's memory)."""
    if annotation == "int | str" or (annotation.startswith("float") and value in ("inf", "-inf", "nan")):
        return "..."
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return "..."


def keyword_parameters(function):
    """The declared keywords of `function` as stub parameter texts, in declaration order."""
    return {name: f"{name}: {annotation} = {default_text(default, annotation)}"
            for name, default, annotation in filkit._filkit._keywords(function)}


def explicit_parameters(node, declared):
    """The stub's own parameters of `node` that are not declared keywords, as texts."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    texts = []
    for arg, default in zip(positional, defaults):
        if arg.arg in declared:
            continue
        text = arg.arg + (f": {ast.unparse(arg.annotation)}" if arg.annotation else "")
        texts.append(text + (f" = {ast.unparse(default)}" if default is not None else ""))
    return texts


def signature_lines(prefix, parameters, returns):
    """`prefix(p1, p2, ...) -> returns: ...` wrapped at WIDTH, continuation lines under the first
    parameter."""
    indent = " " * len(prefix)
    lines, line = [], prefix
    for k, parameter in enumerate(parameters):
        piece = parameter + ("," if k + 1 < len(parameters) else f") -> {returns}: ...")
        if line == prefix:
            line += piece
        elif len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = indent + piece
        else:
            line += " " + piece
    if not parameters:
        line += f") -> {returns}: ..."
    lines.append(line)
    return lines


def generated(node, function, positional_keywords, lines_before):
    """The stub text of `node` (a def) with its keywords from the declaration."""
    declared = keyword_parameters(function)
    explicit = explicit_parameters(node, declared)
    leading = [declared[name] for name in positional_keywords]
    keywords = [text for name, text in declared.items() if name not in positional_keywords]
    # A hand-written **options gives way to the declared keywords, which are all the function takes.
    parameters = leading + explicit + (["*"] if keywords else []) + keywords
    indent = lines_before[node.lineno - 1][:node.col_offset]
    returns = ast.unparse(node.returns) if node.returns else "None"
    return signature_lines(f"{indent}def {node.name}(", parameters, returns)


def targets(tree):
    """(def node, keyword function name, keywords that may be positional) for every stub whose
    options are declared: the module's functions and the constructors of its classes."""
    declared = set(filkit._filkit._keyword_functions())
    positional = filkit._KEYWORD_FUNCTIONS
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in declared:
            yield node, node.name, positional.get(node.name, ())
        elif isinstance(node, ast.ClassDef) and node.name in declared:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    yield item, node.name, ()


def rewrite(text):
    lines = text.split("\n")
    tree = ast.parse(text)
    replacements = []
    for node, function, positional in targets(tree):
        replacements.append((node.lineno - 1, node.end_lineno, generated(node, function, positional, lines)))
    for start, end, new in sorted(replacements, reverse=True):
        lines[start:end] = new
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stubs differ from the declaration")
    args = parser.parse_args()
    with open(STUBS) as f:
        current = f.read()
    wanted = rewrite(current)
    if args.check:
        if wanted != current:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True),
                                                       STUBS, "from the declaration"))
            print(f"{STUBS} differs from the options' declaration: run /usr/bin/python3 scripts/write-stubs.py",
                  file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        temporary = STUBS + ".tmp"
        with open(temporary, "w") as f:
            f.write(wanted)
        os.replace(temporary, STUBS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
