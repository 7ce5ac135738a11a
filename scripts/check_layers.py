#!/usr/bin/env python3
"""Fails when a module includes a header of a module above it in docs/architecture.md's layer table,
or when docs/architecture.md names code that does not exist.

Layers. A module (a folder under src/, or apps/) may include its own headers, those of a module in
a lower layer, and those of a module of its own layer that its row lists after "->". Public headers
(include/kvforge/NAME.h) belong to the module whose row names them. The table is the one source of
truth: change it there, with the reason, when the design changes.

Names. Every `span` of docs/architecture.md that looks like code must exist:
  - a path (`src/engine/engine_core.cc`, `docs/adr/`, `kvstore/kv_chunk.h` as an #include spells
    it, `engine_core.{h,cc}`, a bare file name) must exist in the repository (from its root, or
    under src/ or include/; a bare name anywhere); "#anchor" and ":line" suffixes are ignored, and
    a path with ".." is refused (the repository stands alone);
  - an identifier (`Foo`, `foo_bar()`, `snake_case_field`, `a.b`) must occur as a whole word in the
    code or string literals of src/, include/, apps/, python/ or tests/ (*.h, *.cc, *.py,
    CMakeLists.txt). Comments do not count: a stale comment must not keep a stale name alive;
  - in `A::B`, A and B must both occur, and B must be written as `A::B` somewhere or occur inside
    the body of a class, struct, union, enum or namespace named A;
  - an HTTP path (`/v1/kvforge/kv`) must occur in a string literal.
Spans with spaces (commands, phrases), flags (`--x`, `-mavx2`), numbers, globs and patterns
(`*_avx2.cc`, `arch_<family>.cc`) and other text are not checked; in `name=value` only the name is.
The name check needs the whole repository, so it runs only when REPO_ROOT has a top-level
CMakeLists.txt (the layer test's small trees have none).

Usage: check_layers.py [REPO_ROOT]   (exit 0: clean; 1: violations or missing names, each printed;
2: bad table)
"""
import io
import os
import re
import sys
import tokenize

ROW = re.compile(r"^(?:L(\d)  |    )([a-z_]+(?:/[a-z_]+)?)\s{2,}")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_./]+)"')


class BadTable(Exception):
    pass


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
        raise BadTable(f"check_layers: no layer table under '## Layers' in {path}")
    modules, layer, current = {}, None, None
    for line in block.group(1).splitlines():
        m = ROW.match(line)
        if m:
            if m.group(1) is not None:
                layer = int(m.group(1))
            if layer is None:
                raise BadTable(f"check_layers: row before any layer number: {line!r}")
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


def check_layers(root, modules):
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
    return problems


# --- names in docs/architecture.md ---------------------------------------------------------------

NAME_FOLDERS = ("src", "include", "apps", "python", "tests")
SKIP_DIRS = {".git", "node_modules", ".cache", "__pycache__"}

CPP_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\((?P<raw>.*?)\)(?P=delim)"
  | "(?P<str>(?:\\.|[^"\\\n])*)"
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | '(?:\\.|[^'\\\n])*'
  | (?P<id>[A-Za-z_]\w*)
  | (?P<punct>::|[{};:()\[\]<>=,])
""", re.S | re.X)
WORD = re.compile(r"[A-Za-z_]\w*")
SCOPE_KEYWORDS = {"class", "struct", "union", "enum", "namespace"}


class SourceIndex:
    """What the sources spell, read once: words, A::B pairs, words inside each named scope."""

    def __init__(self, root):
        self.words = set()        # identifiers in code and in string literals (not comments)
        self.pairs = set()        # (A, B) for every A::B in code
        self.scopes = {}          # scope name -> words in the bodies of scopes so named
        self.strings = []         # string literal contents (HTTP paths are looked up here)
        for folder in NAME_FOLDERS:
            for dirpath, dirs, files in os.walk(os.path.join(root, folder)):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                for f in sorted(files):
                    path = os.path.join(dirpath, f)
                    if f.endswith((".h", ".cc")):
                        self.add_cpp(read_text(path))
                    elif f.endswith(".py"):
                        self.add_python(read_text(path))
                    elif f == "CMakeLists.txt":
                        self.words.update(WORD.findall(re.sub(r"#[^\n]*", "", read_text(path))))
        self.string_blob = "\n".join(self.strings)

    def add_string(self, text):
        self.strings.append(text)
        self.words.update(WORD.findall(text))

    def add_cpp(self, text):
        toks = []  # (kind, text): kind "id" or "p"
        for m in CPP_TOKEN.finditer(text):
            kind = m.lastgroup
            if kind == "id":
                toks.append(("id", m.group("id")))
            elif kind == "punct":
                toks.append(("p", m.group("punct")))
            elif kind == "str":
                self.add_string(m.group("str"))
            elif kind in ("raw", "delim"):
                self.add_string(m.group("raw"))
        opens = {}  # token index of a scope's "{" -> its names
        n = len(toks)
        for i, (kind, t) in enumerate(toks):
            if kind != "id":
                continue
            self.words.add(t)
            if i + 2 < n and toks[i + 1] == ("p", "::") and toks[i + 2][0] == "id":
                self.pairs.add((t, toks[i + 2][1]))
            if t in SCOPE_KEYWORDS:
                brace, names = scope_opening(toks, i)
                if brace is not None and names:
                    opens[brace] = names
        stack, active = [], []
        for i, (kind, t) in enumerate(toks):
            if kind == "id":
                for words in active:
                    words.add(t)
            elif t == "{":
                names = opens.get(i, ())
                for name in names:
                    active.append(self.scopes.setdefault(name, set()))
                stack.append(len(names))
            elif t == "}" and stack:
                count = stack.pop()
                if count:
                    del active[-count:]

    def add_python(self, text):
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.NAME:
                    self.words.add(tok.string)
                elif tok.type == tokenize.STRING:
                    self.add_string(tok.string)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            self.words.update(WORD.findall(re.sub(r"#[^\n]*", "", text)))


def read_text(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def scope_opening(toks, i):
    """At a class/struct/union/enum/namespace keyword: the index of the "{" that opens its body and
    the scope's names, or (None, None) when the keyword does not open a named body here."""
    n = len(toks)
    j = i + 1
    if toks[i][1] == "enum" and j < n and toks[j][1] in ("class", "struct"):
        j += 1
    while j < n:  # attributes: [[nodiscard]], alignas(64)
        if toks[j] == ("p", "[") and j + 1 < n and toks[j + 1] == ("p", "["):
            while j < n and toks[j] != ("p", "]"):
                j += 1
            j += 2
        elif toks[j] == ("id", "alignas") and j + 1 < n and toks[j + 1] == ("p", "("):
            while j < n and toks[j] != ("p", ")"):
                j += 1
            j += 1
        else:
            break
    names = []
    while j < n and toks[j][0] == "id" and toks[j][1] != "final":
        names.append(toks[j][1])
        j += 1
        if j < n and toks[j] == ("p", "::"):
            j += 1
        else:
            break
    if not names:
        return None, None
    if toks[i][1] != "namespace":
        names = names[-1:]  # struct Engine::Impl is the scope Impl
    if j < n and toks[j] == ("id", "final"):
        j += 1
    if j < n and toks[j] == ("p", ":") and toks[i][1] != "namespace":
        while j < n and (toks[j][0] == "id" or toks[j][1] in (":", "::", ",", "<", ">")):
            j += 1
    if j < n and toks[j] == ("p", "{"):
        return j, names
    return None, None


SPAN = re.compile(r"`([^`\n]+)`")
IDENT = re.compile(r"~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
CALL = re.compile(r"\([^()]*\)$")
FILE_EXT = re.compile(
    r"[\w.+-]*\.(?:h|cc|cpp|hpp|c|py|md|sh|txt|json|cmake|in|S|html|js|yml|yaml|toml)")
BRACES = re.compile(r"\{([^{}]*)\}")


def expand_braces(p):
    m = BRACES.search(p)
    if m is None:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(p[:m.start()] + alt + p[m.end():]))
    return out


def classify(span):
    """('path' | 'route' | 'ident' | 'dotted', text), or None for spans that are not checked."""
    s = span.strip()
    if not s or any(c.isspace() for c in s) or s.startswith("-") or re.match(r"\.?\d", s):
        return None
    if any(c in s for c in "*?<>|\"'$@!%^&+;"):
        return None  # globs, patterns, templates, operators, quoted text
    if s.startswith("/"):
        return ("route", s)
    if "=" in s:
        s = s.split("=", 1)[0]
    if "/" in s or any(FILE_EXT.fullmatch(re.sub(r"[#:].*$", "", alt)) for alt in expand_braces(s)):
        return ("path", s)
    s = CALL.sub("", s)
    if IDENT.fullmatch(s):
        return ("ident", s)
    if DOTTED.fullmatch(s):
        return ("dotted", s)
    return None


class RepoFiles:
    def __init__(self, root):
        self.root = root
        self._basenames = None

    def basenames(self):
        if self._basenames is None:
            self._basenames = set()
            for dirpath, dirs, files in os.walk(self.root, followlinks=True):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
                self._basenames.update(files)
        return self._basenames

    def problem(self, path):
        """None when `path` exists, else why not."""
        p = re.sub(r"#.*$", "", path)
        p = re.sub(r":\d+(?:-\d+)?$", "", p)
        missing = []
        for one in expand_braces(p):
            if one.startswith("/") or ".." in one.split("/"):
                return "leaves the repository (write paths from the repository root)"
            bare = one.rstrip("/")
            if "/" not in bare:
                top = os.path.exists(os.path.join(self.root, bare))  # src/, docs, ...
                if not top and bare not in self.basenames():
                    missing.append(one)
                continue
            bases = ("", "src", "include")  # from the root, or as an #include spells it
            if not any(os.path.exists(os.path.join(self.root, base, bare)) for base in bases):
                missing.append(one)
        return f"no such path: {', '.join(missing)}" if missing else None


def name_problem(kind, text, index, files):
    if kind == "path":
        return files.problem(text)
    if kind == "route":
        return None if text in index.string_blob else "no string literal in the sources holds it"
    parts = [c.lstrip("~") for c in (text.split("::") if kind == "ident" else text.split("."))]
    absent = [c for c in parts if c not in index.words]
    if absent:
        return f"{', '.join(repr(c) for c in absent)} not found in the sources"
    if kind == "ident":
        for a, b in zip(parts, parts[1:]):
            if (a, b) not in index.pairs and b not in index.scopes.get(a, ()):
                return f"'{b}' is neither written as {a}::{b} nor found inside a scope named {a}"
    return None


def check_names(root):
    """(names checked, problems) for docs/architecture.md."""
    doc = os.path.join(root, "docs", "architecture.md")
    index, files = SourceIndex(root), RepoFiles(root)
    checked, problems = 0, []
    with open(doc, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                continue
            for m in SPAN.finditer(line):
                c = classify(m.group(1))
                if c is None:
                    continue
                checked += 1
                why = name_problem(c[0], c[1], index, files)
                if why:
                    problems.append(f"docs/architecture.md:{lineno}: `{m.group(1)}`: {why}")
    return checked, problems


def main():
    here = os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else here)
    try:
        modules = read_table(root)
    except BadTable as e:
        print(e, file=sys.stderr)
        return 2
    problems = check_layers(root, modules)
    for p in problems:
        print(p)
    print(f"check_layers: {len(modules)} modules, {len(problems)} violation(s)")
    missing = []
    if os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        checked, missing = check_names(root)
        for p in missing:
            print(p)
        print(f"check_layers: docs/architecture.md: {checked} code names, {len(missing)} missing")
    return 1 if problems or missing else 0


if __name__ == "__main__":
    sys.exit(main())
