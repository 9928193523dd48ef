"""The simulator crate's layers, read from its imports (docs/engine.md, "Layers").

Every `crate::` and `super::` path outside a file's `#[cfg(test)] mod tests` names a module; the
module's layer must be the importer's own or one below it, and no files may import each other in
a circle. Prints the layer picture (each layer's modules and lines) and every upward import and
circle; exits 1 if there is one, 2 on a module no layer claims.

    python scripts/layers.py [crates/steer-sim/src]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Bottom first: a module may import its own layer and those above it in this list.
LAYERS: list[tuple[str, list[str]]] = [
    ("units and errors", ["units", "error", "params", "stats", "kinds"]),
    ("engine", ["engine"]),
    (
        "memory, caches, hierarchy",
        ["cache", "platform", "memory", "directory", "steering", "hierarchy", "flows", "system"],
    ),
    ("devices", ["devices", "copy"]),
    ("CPUs and workloads", ["cpu", "tlb", "workloads"]),
    ("scenarios", ["scenario", "simulation", "results", "catalog"]),
    ("host", ["host"]),
]
# The crate root re-exports and test support sit outside the layers.
OUTSIDE = {"lib", "testing"}

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")


def module_of(rel: Path) -> str:
    """`devices/nic.rs` -> `devices::nic`; `devices/mod.rs` -> `devices`."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return "::".join(parts)


def layer_of(module: str) -> int | None:
    top = module.split("::")[0]
    for index, (_, tops) in enumerate(LAYERS):
        if top in tops:
            return index
    return None


def library_text(text: str) -> list[tuple[int, str]]:
    """The numbered lines before the file's test module, comments dropped."""
    lines = text.splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        if line.strip() == "#[cfg(test)]" and number < len(lines) and lines[number].startswith("mod tests"):
            break
        out.append((number, line.split("//")[0]))
    return out


def imports(src: Path) -> dict[str, list[tuple[int, str]]]:
    """Per module, the modules it names (with the line), resolved to files that exist."""
    modules = {module_of(p.relative_to(src)) for p in src.rglob("*.rs")}
    found: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        me = module_of(rel)
        used: list[tuple[int, str]] = []
        for number, line in library_text(path.read_text()):
            for match in PATH.finditer(line):
                # `super` is the parent of this file's module, `devices` for `devices/nic.rs`.
                base = [] if match.group(1) == "crate" else me.split("::")[:-1]
                tail = line[match.start(2) :]
                for segment in _paths(tail):
                    named = _resolve(base + segment, modules)
                    if named and named != me:
                        used.append((number, named))
        found[me] = used
    return found


def _paths(tail: str) -> list[list[str]]:
    """`::a::{b::c, d}` -> [[a, b, c], [a, d]]; `::a::b` -> [[a, b]]."""
    tail = tail[2:] if tail.startswith("::") else tail
    head = re.match(r"((?:[A-Za-z_][A-Za-z0-9_]*::)*)(\{)?", tail)
    prefix = [p for p in head.group(1).split("::") if p]
    if not head.group(2):
        word = re.match(r"[A-Za-z_][A-Za-z0-9_]*", tail[head.end(1) :])
        return [prefix + ([word.group(0)] if word else [])]
    depth, end = 0, head.end(1)
    while end < len(tail):
        depth += {"{": 1, "}": -1}.get(tail[end], 0)
        if depth == 0:
            break
        end += 1
    inner = tail[head.end(1) + 1 : end]
    out, depth, item = [], 0, ""
    for ch in inner + ",":
        if ch == "," and depth == 0:
            if item.strip():
                out += [prefix + p for p in _paths("::" + item.strip())]
            item = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        item += ch
    return out


def _resolve(path: list[str], modules: set[str]) -> str | None:
    """The longest prefix of `path` that is a module of the crate."""
    path = [p for p in path if p != "self"]
    for cut in range(len(path), 0, -1):
        name = "::".join(path[:cut])
        if name in modules:
            return name
    return None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(src: Path) -> tuple[list[str], int]:
    """The report's lines and the exit code."""
    found = imports(src)
    lines_of = {module_of(p.relative_to(src)): len(p.read_text().splitlines()) for p in src.rglob("*.rs")}
    unclaimed = sorted(m for m in found if m.split("::")[0] not in OUTSIDE and layer_of(m) is None)
    if unclaimed:
        return [f"layers: no layer claims {', '.join(unclaimed)} (scripts/layers.py, LAYERS)"], 2
    out = ["layers (bottom first):"]
    for index, (name, _) in enumerate(LAYERS):
        members = sorted(m for m in found if m.split("::")[0] not in OUTSIDE and layer_of(m) == index)
        total = sum(lines_of[m] for m in members)
        out.append(f"  {index} {name} ({len(members)} files, {total} lines): {' '.join(members)}")
    upward = []
    graph: dict[str, set[str]] = {}
    for me, used in sorted(found.items()):
        if me.split("::")[0] in OUTSIDE:
            continue
        for number, named in used:
            if named.split("::")[0] in OUTSIDE:
                continue
            graph.setdefault(me, set()).add(named)
            if layer_of(named) > layer_of(me):
                upward.append(f"  {me}:{number} -> {named} ({LAYERS[layer_of(named)][0]})")
    upward = sorted(set(upward))
    pairs = {line.split(":")[0] + line.split("->")[1].split(" (")[0] for line in upward}
    out.append(f"upward imports: {len(upward)} ({len(pairs)} pairs of modules)")
    out += upward
    found_circles = circles(graph)
    out.append(f"circles: {len(found_circles)}")
    out += [f"  {' <-> '.join(c)}" for c in found_circles]
    return out, 1 if upward or found_circles else 0


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "crates/steer-sim/src"
    lines, code = check(src)
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
