#!/usr/bin/env python3
"""Module and function sizes of a package: median and largest module (lines), and the
longest functions (lines from `def` to the end of the body, nested ones counted apart).

usage: scripts/code_sizes.py [PKG_DIR] [--top N]     (default: benchlib, top 5)
"""
import ast
import statistics
import sys
from pathlib import Path


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, start, node.end_lineno - start + 1


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 5
    if "--top" in argv:
        args.remove(str(top))
    root = Path(args[0] if args else "benchlib")
    modules, funcs = {}, []
    for f in sorted(root.rglob("*.py")):
        text = f.read_text()
        modules[str(f)] = len(text.splitlines())
        funcs += [(n, str(f), name, line) for name, line, n in functions(ast.parse(text))]
    sizes = sorted(modules.values())
    print(f"{len(sizes)} modules: median {statistics.median(sizes):g} lines, "
          f"max {sizes[-1]} ({max(modules, key=modules.get)})")
    print("largest modules: " + ", ".join(f"{m} {n}" for m, n in
                                          sorted(modules.items(), key=lambda x: -x[1])[:top]))
    print("longest functions:")
    for n, f, name, line in sorted(funcs, reverse=True)[:top]:
        print(f"  {n:4d} lines  {f}:{line} {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
