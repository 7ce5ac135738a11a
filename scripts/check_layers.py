#!/usr/bin/env python3
"""Fails when a module includes a header of a module above it in docs/architecture.md's layer table.

A module (a folder under src/, or apps/) may include its own headers, those of a module in a lower
layer, and those of a module of its own layer that its row lists after "->". Public headers
(include/kvforge/NAME.h) belong to the module whose row names them. The table is the one source of
truth: change it there, with the reason, when the design changes.

Usage: check_layers.py [REPO_ROOT]   (exit 0: clean; 1: violations, each printed; 2: bad table)
"""
import os
import re
import sys

ROW = re.compile(r"^(?:L(\d)  |    )([a-z_]+(?:/[a-z_]+)?)\s{2,}")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_./]+)"')


class Module:
    def __init__(self, name, layer):
        self.name = name
        self.layer = layer
        self.text = ""

    def same_layer_deps(self):
        deps = set()
        for part in self.text.split("->")[1:]:
            for word in re.split(r"[,\s]+", part):
                if re.fullmatch(r"[a-z_]+", word):
                    deps.add(word)
        return deps

    def public_headers(self):
        if "include/kvforge/" not in self.text:
            return set()
        return set(re.findall(r"\b([a-z_]+\.h)\b", self.text))


def read_table(root):
    path = os.path.join(root, "docs", "architecture.md")
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    start = doc.find("## Layers")
    block = re.search(r"```\n(.*?)```", doc[start:], re.S) if start >= 0 else None
    if block is None:
        raise SystemExit(f"check_layers: no layer table under '## Layers' in {path}")
    modules, layer, current = {}, None, None
    for line in block.group(1).splitlines():
        m = ROW.match(line)
        if m:
            if m.group(1) is not None:
                layer = int(m.group(1))
            if layer is None:
                raise SystemExit(f"check_layers: row before any layer number: {line!r}")
            name = m.group(2).split("/")[0]  # "apps/cli" is the apps/ folder
            current = modules.setdefault(name, Module(name, layer))
            current.text += " " + line[m.end():]
        elif current is not None and line.strip():
            current.text += " " + line.strip()
    return modules


def source_files(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith((".h", ".cc", ".cpp", ".hpp")):
                yield os.path.join(dirpath, f)


def module_of(root, path):
    rel = os.path.relpath(path, root).split(os.sep)
    return rel[1] if rel[0] == "src" else rel[0]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    modules = read_table(root)
    public = {}
    for m in modules.values():
        for h in m.public_headers():
            public[h] = m.name
    problems = []
    folders = [os.path.join("src", d) for d in sorted(os.listdir(os.path.join(root, "src")))
               if os.path.isdir(os.path.join(root, "src", d))] + ["apps"]
    for folder in folders:
        for path in source_files(root, folder):
            owner_name = module_of(root, path)
            owner = modules.get(owner_name)
            rel = os.path.relpath(path, root)
            if owner is None:
                problems.append(f"{rel}: module '{owner_name}' is not in docs/architecture.md's layer table")
                continue
            allowed_same = owner.same_layer_deps()
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target_name = m.group(1)
                    if target_name == "kvforge":
                        target_name = public.get(m.group(2))
                        if target_name is None:
                            problems.append(f"{rel}:{lineno}: public header kvforge/{m.group(2)} has no owner in the layer table")
                            continue
                    target = modules.get(target_name)
                    if target is None or target_name == owner.name:
                        continue  # own headers, or a folder that is not a module (system-like)
                    if target.layer < owner.layer or (target.layer == owner.layer and target_name in allowed_same):
                        continue
                    where = "above" if target.layer > owner.layer else "beside (not listed after '->')"
                    problems.append(f"{rel}:{lineno}: {owner.name} (L{owner.layer}) includes {m.group(1)}/{m.group(2)}: "
                                    f"{target_name} (L{target.layer}) is {where} it")
    for p in problems:
        print(p)
    print(f"check_layers: {len(modules)} modules, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
