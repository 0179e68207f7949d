"""What a tool call reaches for, once its spelling is undone: the paths, names, globs and listings it names.

Why it exists: ``cat ../events.jsonl`` and ``cat ../ev*nts.json?``, ``cat ev''ents.jsonl``, ``F=events; cat
../$F.jsonl``, ``cat $(echo ZXZlbnRzLmpzb25s | base64 -d)``, ``python3 -c "open('../' + 'eve' + 'nts.jsonl')"``
and ``find .. -name '*.jsonl'`` are one attempt. The sandbox refuses all of them; the auditor must still see
each one. So before any rule matches a command against the run's files or the held-out data, this module
resolves what the command names (:func:`resolve`), and :func:`reaches` matches that against the real set of
protected paths (:class:`Protected`), globs by ``fnmatch`` against the protected names, not their text.

What :func:`resolve` undoes, without running anything: shell quoting and concatenation (``shlex``), ANSI-C
quoting (``$'\\x65'``), variables set in the same command (``F=events``, ``export D=..``, ``${X:-..}``,
``$PWD``, ``$OLDPWD``), brace expansion (``{head,run}.json``), ``cd``, command substitutions it can evaluate
(``echo``/``printf``/``base64 -d``/``xxd -r -p``/``rev``/``pwd``/``dirname``), base64, hex, octal, URL and
``\\x`` escapes anywhere in the text, ``sh -c``/``bash -c``/``eval``, heredocs, and Python code (``-c``,
heredocs, ``os.system``): string expressions built from literals (``'a' + 'b'``, ``[::-1]``,
``bytes.fromhex``, ``b64decode``, ``unquote``, ``os.path.join``, ``Path(..) / x``, ``.parent``,
``os.getcwd()``, ``dirname``) and the globs and listings it asks for (``glob.glob``, ``Path.glob``/``rglob``,
``os.listdir``/``scandir``/``walk``, ``iterdir``). Other languages' ``-e`` code gives its string literals,
joined where ``+`` joins them.

Invariant: resolution only adds readings; the command's own text is always one of them, so a name written
plainly is found as before. What it cannot undo: a path computed at run time from data it cannot see (read
from a file, a network reply, arithmetic on character codes it does not evaluate); the judge reads those
(docs/audit.md), and the sandbox refuses the access itself.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import fnmatch
import itertools
import posixpath
import re
import shlex
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field

ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::?[-=]([^}]*))?\}|\$([A-Za-z_]\w*)")
SUBST = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?)\n\s*\2\s*(?:\n|$)", re.S)
BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")
PREFIX = frozenset({"sudo", "env", "command", "exec", "nohup", "time", "timeout", "xargs", "nice", "stdbuf", "builtin"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "eval"})
PYTHONS = re.compile(r"^(?:python[\d.]*|pypy[\d.]*|ipython)$")
OTHER_CODE = frozenset({"node", "nodejs", "deno", "perl", "ruby", "php", "Rscript", "lua", "awk", "osascript"})
LISTERS = frozenset({"ls", "dir", "vdir", "tree", "du", "find", "fd", "fdfind", "locate", "mlocate", "plocate",
                     "stat", "exa", "eza", "lsd"})
EVERYWHERE = frozenset({"locate", "mlocate", "plocate"})  # search the whole file system
GLOB_CHARS = re.compile(r"[*?\[]")
ROOT_TOOLS = re.compile(r"^(?:glob|ls|list_dir|list_directory|listdir)$", re.I)  # an agent tool that lists its path
MAX_DEPTH = 3  # decodings of decodings
MAX_READINGS = 400


@dataclass
class Resolution:
    """What a command names: words (paths, names, patterns) with the directory they are relative to, and the
    directories it lists or searches."""

    words: list[tuple[str, str]] = field(default_factory=list)  # (word, cwd)
    listings: list[tuple[str, str]] = field(default_factory=list)  # (directory, cwd)
    programs: set[str] = field(default_factory=set)
    decoded: list[str] = field(default_factory=list)  # what an encoding in the text decodes to

    def add(self, word: str, cwd: str = ".") -> None:
        if word and len(self.words) < MAX_READINGS and (word, cwd) not in self.words:
            self.words.append((word, cwd))

    def text(self) -> str:
        """Every reading, one per line (the programs a command runs first): what a rule that matches words reads."""
        return "\n".join([*sorted(self.programs), *(w for w, _ in self.words), *self.decoded])


# ----------------------------------------------------------------------------- decodings


def _printable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or any(not (c.isprintable() or c in "\n\t") for c in text):
        return None
    return text


def decodings(text: str) -> list[str]:
    """What the encoded pieces of ``text`` decode to: base64, hex, ``\\x``/octal/``\\u`` escapes, URL escapes."""
    out: list[str] = []
    for m in re.finditer(r"(?<![\w+/=%])[A-Za-z0-9+/_-]{8,}={0,2}(?![\w+/=])", text):
        blob = m.group(0)
        if blob.isalpha() and blob.islower():
            continue  # a plain word
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(blob + "=" * (-len(blob) % 4))
            except (binascii.Error, ValueError):
                continue
            got = _printable(raw)
            if got and len(got) >= 3 and re.search(r"[./\w]{3}", got):
                out.append(got)
                break
    for m in re.finditer(r"(?<![\w])(?:[0-9a-fA-F]{2}){4,}(?![\w])", text):
        got = _printable(bytes.fromhex(m.group(0)))
        if got and not m.group(0).isdigit():
            out.append(got)
    for m in re.finditer(r"(?:\\x[0-9a-fA-F]{2}|\\[0-7]{3}|\\u[0-9a-fA-F]{4}|[^\s'\"\\])+", text):
        piece = m.group(0)
        if "\\" in piece:
            try:
                got = codecs.decode(piece.encode("latin-1", "ignore"), "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                continue
            out.append(got)
    for m in re.finditer(r"[^\s'\"]*%[0-9A-Fa-f]{2}[^\s'\"]*", text):
        out.append(urllib.parse.unquote(m.group(0)))
    return [d for d in dict.fromkeys(out) if d and d != text]


# ----------------------------------------------------------------------------- shell


def _ansi_c(text: str) -> str:
    """``$'\\x65vents'`` as the quoted string it stands for."""
    def one(m: re.Match[str]) -> str:
        try:
            inner = codecs.decode(m.group(1).encode("latin-1", "ignore"), "unicode_escape")
        except (UnicodeDecodeError, ValueError):
            inner = m.group(1)
        return "'" + inner.replace("'", "'\"'\"'") + "'"
    return ANSI_C.sub(one, text)


def _expand_vars(text: str, env: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)  # ${X:-default}
        return m.group(0)
    return VAR.sub(one, text)


def _braces(word: str) -> list[str]:
    m = BRACE.search(word)
    if m is None:
        return [word]
    out: list[str] = []
    for part in m.group(1).split(",")[:16]:
        out += _braces(word[:m.start()] + part + word[m.end():])
    return out[:64]


def _segments(command: str) -> list[str]:
    """The simple commands of a command line: split at ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines that no
    quote holds (``2>&1`` is a redirection, not a split)."""
    out: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        c = command[i]
        if quote is not None:
            cur.append(c)
            if c == "\\" and quote == '"' and i + 1 < len(command):
                cur.append(command[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "\\" and i + 1 < len(command):
            cur.append(command[i:i + 2])
            i += 2
            continue
        elif command.startswith(("&&", "||"), i):
            out.append("".join(cur))
            cur = []
            i += 2
            continue
        elif c in ";|\n" or (c == "&" and command[i - 1:i] != ">" and command[i + 1:i + 2] != ">"):
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    out.append("".join(cur))
    return [seg for seg in out if seg.strip()]


def _split(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def _printf(fmt: str, args: list[str]) -> str:
    """``printf FORMAT ARGS``: each ``%s`` (``%d``, ``%b``, ``%q``) takes the next argument."""
    rest = iter(args)
    return re.sub(r"%[-\d.]*[sdbq]", lambda m: next(rest, ""), fmt)


def _evaluate(pipeline: str, env: dict[str, str]) -> str | None:
    """What a command substitution prints, for the few pure commands it can evaluate; None otherwise."""
    value: str | None = None
    for part in (p.strip() for p in _segments(pipeline)):
        words = _split(_expand_vars(_ansi_c(part), env))
        if not words:
            return None
        prog, args = words[0].rsplit("/", 1)[-1], [w for w in words[1:]]
        flags = [a for a in args if a.startswith("-")]
        plain = [a for a in args if not a.startswith("-")]
        here = re.search(r"<<<\s*(\S+)", part)
        if prog == "echo":
            value = " ".join(plain)
        elif prog == "printf" and plain:
            try:
                fmt = codecs.decode(plain[0].encode("latin-1", "ignore"), "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                fmt = plain[0]
            value = _printf(fmt, plain[1:])
        elif prog == "pwd":
            value = "."
        elif prog in ("dirname", "basename") and plain:
            value = posixpath.join(plain[0], "..") if prog == "dirname" else posixpath.basename(plain[0])
        elif prog == "base64" and any(f in ("-d", "--decode", "-D") for f in flags):
            src = here.group(1).strip("'\"") if here else value
            try:
                value = base64.b64decode((src or "").strip() + "=" * (-len((src or "").strip()) % 4)).decode()
            except (binascii.Error, ValueError, UnicodeDecodeError):
                return None
        elif prog == "xxd" and "-r" in flags:
            src = here.group(1).strip("'\"") if here else value
            try:
                value = bytes.fromhex(re.sub(r"\s", "", src or "")).decode()
            except (ValueError, UnicodeDecodeError):
                return None
        elif prog == "tr" and value is not None and len(plain) == 2 and not flags:
            value = value.translate(str.maketrans(plain[0][:len(plain[1])], plain[1][:len(plain[0])]))
        elif prog == "rev" and value is not None:
            value = "\n".join(line[::-1] for line in value.split("\n"))
        elif prog in ("cat", "head", "tail") and value is not None:
            continue
        else:
            return None
    return value.strip("\n") if value is not None else None


def _substitute(text: str, env: dict[str, str], res: Resolution) -> str:
    """Command substitutions replaced by what they print (when known), innermost first; each inner command is
    also read as a command of its own."""
    for _ in range(8):
        m = SUBST.search(text)
        if m is None:
            return text
        inner = m.group(1) if m.group(1) is not None else m.group(2) or ""
        _shell(inner, res, env=dict(env))
        value = _evaluate(inner, env)
        if value is not None:
            res.decoded.append(value)
        text = text[:m.start()] + (value if value is not None else "") + text[m.end():]
    return text


def _shell(command: str, res: Resolution, depth: int = 0, env: dict[str, str] | None = None) -> None:
    if depth > MAX_DEPTH:
        return
    env = env if env is not None else {"PWD": ".", "OLDPWD": "..", "HOME": "~"}
    cwd = "."
    bodies: list[tuple[str, str]] = []  # heredoc bodies, by the program that reads them

    def heredoc(m: re.Match[str]) -> str:
        bodies.append((command[:m.start()], m.group(3)))
        return "\n"
    command = HEREDOC.sub(heredoc, command)
    for before, body in bodies:
        last = _split(_segments(before)[-1]) if before.strip() else []
        reader = last[0].rsplit("/", 1)[-1] if last else ""
        if PYTHONS.match(reader):
            _python(body, res, depth + 1)
        elif reader in SHELLS or reader == "":
            _shell(body, res, depth + 1)
        else:
            _literals(body, res)
    command = _substitute(_ansi_c(command), env, res)
    for segment in _segments(command):
        segment = _expand_vars(segment, env)
        words = _split(segment)
        while words and ASSIGN.match(words[0]):
            name, value = ASSIGN.match(words[0]).groups()  # type: ignore[union-attr]
            env[name] = value
            words.pop(0)
        while words and (words[0] in PREFIX or re.fullmatch(r"-\S*|[\d.]+[smhd]?", words[0])):
            words.pop(0)
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        args = words[1:]
        res.programs.add(program)
        if program in ("export", "declare", "local", "readonly", "typeset"):
            for arg in args:
                m = ASSIGN.match(arg)
                if m:
                    env[m.group(1)] = m.group(2)
            continue
        if program in ("cd", "pushd"):
            target = next((a for a in args if not a.startswith("-")), "~")
            cwd = _join(cwd, target)
            res.add(target, ".")
            continue
        if program in SHELLS:
            code = args[args.index("-c") + 1] if "-c" in args and args.index("-c") + 1 < len(args) else " ".join(args)
            _shell(code, res, depth + 1, dict(env))
            continue
        if PYTHONS.match(program):
            if "-c" in args and args.index("-c") + 1 < len(args):
                _python(args[args.index("-c") + 1], res, depth + 1)
            for arg in args:
                res.add(arg, cwd)
            continue
        if program in OTHER_CODE:
            for arg in args:
                _literals(arg, res)
            continue
        expanded = [w for a in args for w in _braces(a)]
        for arg in expanded:
            res.add(arg, cwd)
            if program not in LISTERS and not arg.startswith("-") and _outside(_where(arg, cwd)):
                res.listings.append((arg, cwd))  # reads, copies or archives outside the workspace: exploring
        if program in LISTERS:
            roots = _roots(program, expanded)
            for root in roots:
                res.listings.append((root, cwd))
            if program == "find":
                for flag, value in itertools.pairwise(expanded):
                    if flag.lstrip("-") in ("name", "iname", "path", "ipath", "wholename", "iwholename"):
                        for root in roots:
                            res.add(posixpath.join(root, "**", value) if "path" not in flag else value, cwd)
            elif program in EVERYWHERE:
                for arg in expanded:
                    if not arg.startswith("-"):
                        res.add(posixpath.join("/", "**", arg), cwd)
        if program in ("rg", "ag", "fd", "fdfind", "grep") and ("--files" in expanded or "-r" in expanded
                                                              or "-R" in expanded or "-rn" in expanded):
            for arg in expanded[1:] if program == "grep" else expanded:
                if not arg.startswith("-") and ("/" in arg or arg in (".", "..")):
                    res.listings.append((arg, cwd))


def _roots(program: str, args: list[str]) -> list[str]:
    """The directories a listing command lists (``ls`` with no path lists the current one)."""
    if program in EVERYWHERE:
        return ["/"]
    if program == "find":
        roots = []
        for arg in args:
            if arg.startswith(("-", "(", "!")):
                break
            roots.append(arg)
        return roots or ["."]
    paths = [a for a in args if not a.startswith("-") and not re.fullmatch(r"\d+", a)]
    return paths or ["."]


def _join(cwd: str, path: str) -> str:
    if path.startswith(("/", "~")):
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


# ----------------------------------------------------------------------------- code


def _literals(code: str, res: Resolution) -> None:
    """String literals of code in any language, ``'a' + 'b'`` chains joined."""
    lit = r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\""
    chain = re.compile(rf"(?:{lit})(?:\s*[+.]\s*(?:{lit}))*")
    for m in chain.finditer(code):
        parts = re.findall(lit, m.group(0))
        res.add("".join(a or b for a, b in parts))


class _Py:
    """A partial evaluator of Python string expressions built from literals (no code is run)."""

    def __init__(self, res: Resolution, depth: int) -> None:
        self.res = res
        self.depth = depth
        self.env: dict[str, str] = {}

    def value(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return node.value
            if isinstance(node.value, bytes):
                return node.value.decode("latin-1")
            return None
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = [self.value(v.value) if isinstance(v, ast.FormattedValue) else self.value(v) for v in node.values]
            return "".join(p or "" for p in parts)
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left), self.value(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Div):
                return posixpath.join(left, right)
            return None
        if isinstance(node, ast.Subscript):
            base = self.value(node.value)
            if isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
                inner = self.value(node.value.value)
                idx = node.slice.value if isinstance(node.slice, ast.Constant) else 0
                return posixpath.join(inner or ".", *([".."] * (int(idx) + 1))) if isinstance(idx, int) else None
            if base is not None and isinstance(node.slice, ast.Slice) and node.slice.step is not None:
                step = self.value(node.slice.step) if not isinstance(node.slice.step, ast.UnaryOp) else "-1"
                return base[::-1] if step == "-1" else None
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "parent":
                inner = self.value(node.value)
                return posixpath.join(inner or ".", "..")
            if node.attr in ("curdir",):
                return "."
            if node.attr in ("pardir",):
                return ".."
            return None
        if isinstance(node, ast.Call):
            return self.call(node)
        return None

    def call(self, node: ast.Call) -> str | None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        args = [self.value(a) for a in node.args]
        first = args[0] if args else None
        if last == "decode" and name.startswith("codecs") and first is not None and len(args) > 1 and args[1]:
            enc = args[1].lower().replace("-", "_")
            try:
                got, _ = codecs.lookup(enc).decode(first if enc.startswith("rot") else first.encode("latin-1"))  # type: ignore[arg-type]
            except (LookupError, ValueError, TypeError, binascii.Error):
                return None
            return got.decode("latin-1") if isinstance(got, bytes) else str(got)
        if isinstance(node.func, ast.Attribute) and last in ("decode", "strip", "lower", "upper", "rstrip",
                                                             "lstrip", "encode", "resolve", "absolute",
                                                             "expanduser", "as_posix", "read_text"):
            return self.value(node.func.value)
        if last == "join" and isinstance(node.func, ast.Attribute) and name.startswith(("os.path", "posixpath", "path")):
            return posixpath.join(*[a or "" for a in args]) if args else None
        if last == "join" and isinstance(node.func, ast.Attribute):
            sep = self.value(node.func.value)
            items = node.args[0] if node.args else None
            if sep is not None and isinstance(items, ast.List | ast.Tuple):
                parts = [self.value(e) for e in items.elts]
                return sep.join(p for p in parts if p is not None)
            return None
        if last in ("fromhex",) and first is not None:
            try:
                return bytes.fromhex(first).decode("latin-1")
            except ValueError:
                return None
        if last in ("b64decode", "urlsafe_b64decode", "decodebytes", "standard_b64decode") and first is not None:
            try:
                return base64.b64decode(first + "=" * (-len(first) % 4)).decode("latin-1")
            except (binascii.Error, ValueError):
                return None
        if last in ("unhexlify", "a2b_hex") and first is not None:
            try:
                return binascii.unhexlify(first).decode("latin-1")
            except (binascii.Error, ValueError):
                return None
        if last in ("unquote", "unquote_plus") and first is not None:
            return urllib.parse.unquote(first)
        if last in ("Path", "PurePath", "PosixPath", "str", "fspath", "abspath", "realpath", "normpath",
                    "expanduser", "expandvars"):
            return first if args else "."
        if last in ("getcwd", "cwd", "getcwdb"):
            return "."
        if last == "home":
            return "~"
        if last == "dirname" and first is not None:
            return posixpath.join(first, "..")
        if last == "chr" and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, int) and 0 <= node.args[0].value < 0x110000:
            return chr(node.args[0].value)
        return None

    def visit(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                got = self.value(node.value)
                if got is not None:
                    self.env[node.targets[0].id] = got
        for node in ast.walk(tree):
            if isinstance(node, ast.expr):
                got = self.value(node)
                if got:
                    self.res.add(got)
            if isinstance(node, ast.Call):
                self.listing(node)

    def listing(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        args = [self.value(a) for a in node.args]
        first = args[0] if args else None
        if last in ("glob", "iglob", "rglob") and isinstance(node.func, ast.Attribute) and \
                not name.startswith("glob."):
            root = self.value(node.func.value) or "."
            if first is not None:
                self.res.add(posixpath.join(root, "**", first) if last == "rglob" else posixpath.join(root, first))
                self.res.listings.append((root, "."))
        elif last in ("glob", "iglob") and first is not None:
            self.res.add(first)
            self.res.listings.append((posixpath.dirname(first) or ".", "."))
        elif last in ("listdir", "scandir", "walk", "iterdir", "fwalk", "chdir"):
            listed = self.value(node.func.value) if last == "iterdir" and isinstance(node.func, ast.Attribute) else first
            self.res.listings.append((listed or ".", "."))
        elif last in ("system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput",
                      "getstatusoutput"):
            items = node.args[0] if node.args else None
            if isinstance(items, ast.List | ast.Tuple):
                parts = [self.value(e) or "" for e in items.elts]
                _shell(shlex.join(parts), self.res, self.depth + 1)
            elif first is not None:
                _shell(first, self.res, self.depth + 1)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _python(code: str, res: Resolution, depth: int) -> None:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        _literals(code, res)
        return
    _Py(res, depth).visit(tree)


# ----------------------------------------------------------------------------- resolve


def resolve(text: str, *, shell: bool = True) -> Resolution:
    """Everything ``text`` (a command line, or ``shell=False``: a path or pattern an agent tool was given)
    names, read every way it can be read; its own words are always among them."""
    res = Resolution()
    seen: set[str] = set()
    todo = [(text, 0)]
    while todo:
        piece, depth = todo.pop()
        if piece in seen or depth > MAX_DEPTH:
            continue
        seen.add(piece)
        if shell:
            _shell(piece, res, depth)
        else:
            res.add(piece)
        for word in re.split(r"\s+", piece):
            res.add(word.strip("'\"();,"))
        for decoded in decodings(piece):
            res.decoded.append(decoded)
            todo.append((decoded, depth + 1))
    if any(p in res.programs for p in ("rev", "tac")) or "[::-1]" in text or "reverse" in text:
        res.decoded += [d[::-1] for d in list(res.decoded)]
    return res


# ----------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Protected:
    """The paths a tool call must not reach for: ``kind`` ``run`` (the run's own directory, the runs beside it
    and the run's file names) or ``held`` (the oracle's held-out paths and their file names)."""

    run_dir: str
    runs_dir: str | None  # None: the runs' directory is the agents' own scratch (the temp directory)
    run_names: tuple[str, ...]  # events.jsonl, head.json, ...
    held: tuple[str, ...] = ()
    held_names: tuple[str, ...] = ()

    def files(self) -> list[tuple[str, str]]:
        """(kind, absolute path) of every protected file."""
        out = [("run", posixpath.join(self.run_dir, n)) for n in self.run_names]
        out += [("held", h) for h in self.held if h.startswith("/")]
        return out

    def names(self) -> list[tuple[str, str]]:
        return [("run", n) for n in self.run_names] + [("held", n) for n in self.held_names]


@dataclass(frozen=True)
class Hit:
    kind: str  # run | held
    target: str  # the protected path or name it reaches
    how: str  # how, in words
    severity: str  # high | warn
    word: str  # the reading that reaches it


def _named(word: str, name: str) -> bool:
    """``word`` names ``name`` as a path or file name (``events.jsonl``, ``../events.jsonl``; not ``myevents.jsonl``);
    a name written ``/blobs`` only as a path component (``../blobs/ab``, not the word ``blobs``)."""
    if name.startswith("/"):
        return re.search(rf"(?:^|/){re.escape(name.strip('/'))}(?:/|$)", word) is not None and "/" in word
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", word) is not None


def _where(word: str, cwd: str) -> str:
    """The word as a normalised path: absolute, ``~/...``, or relative to the workspace (``../x`` is outside it)."""
    if word.startswith("~"):
        return posixpath.normpath("/~home" + word[1:])
    return posixpath.normpath(word if word.startswith("/") else posixpath.join(cwd, word))


def _outside(path: str) -> bool:
    return path == ".." or path.startswith("../") or path.startswith("/~home/..")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _glob_match(pattern: str, path: str) -> bool:
    """Component-wise glob match (``*`` stays within a component, ``**`` spans any), case-insensitive."""
    pat = [p for p in pattern.lower().split("/") if p not in ("", ".")]
    parts = [p for p in path.lower().split("/") if p]

    def go(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(parts)
        if pat[i] == "**":
            return any(go(i + 1, k) for k in range(j, len(parts) + 1))
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], pat[i]) and go(i + 1, j + 1)
    return go(0, 0)


def _broad(pattern: str, name: str) -> bool:
    """A glob that matches any file of ``name``'s type (``*.jsonl``, ``*``), not this name in particular."""
    ext = name[name.rfind("."):] if "." in name.lstrip(".") else ""
    return any(fnmatch.fnmatchcase(decoy, pattern.lower()) for decoy in (f"zq{ext}", f"zqzqzq{ext}", "zq", "zqzqzq"))


def reaches(res: Resolution, protected: Protected) -> list[Hit]:
    """What the resolved command reaches of the protected paths: named outright, matched by a glob, or listed
    from outside the workspace (with a name fragment in the same command: searched for)."""
    hits: list[Hit] = []
    runs = [("run", protected.run_dir)] + ([("run", protected.runs_dir)] if protected.runs_dir else [])
    held_dirs = {posixpath.dirname(h): h for h in protected.held if h.startswith("/")}
    exploring: list[str] = []
    for word, cwd in res.words + [(d, ".") for d in res.decoded]:
        if not word:
            continue
        path = _where(word, cwd)
        glob = GLOB_CHARS.search(word) is not None
        for kind, name in protected.names():
            if _named(word, name):
                hits.append(Hit(kind, name, f"names {name!r}" + ("" if name in word else f" ({word!r})"), "high", word))
        for kind, root in runs:
            if _under(path, root.rstrip("/")) or (word.rstrip("/") == root.rstrip("/")):
                hits.append(Hit(kind, root, f"names {root!r}", "high", word))
        for h in protected.held:
            if h.startswith("/") and _under(path, h):
                hits.append(Hit("held", h, f"names {h!r}", "high", word))
        if glob:
            base = posixpath.basename(word.rstrip("/")) or word
            if not re.search(r"[^*?/]", base):
                res.listings.append((posixpath.dirname(word.rstrip("/")) or ".", cwd))  # ls ../*: a listing
                continue
            rooted_out = _outside(path) or path.startswith("/")
            for kind, full in protected.files():
                if path.startswith("/") and _glob_match(path, full):
                    hits.append(Hit(kind, full, f"the glob {word!r} matches {full}", "high", word))
            for kind, name in protected.names():
                if not fnmatch.fnmatchcase(name.strip("/").lower(), base.lower()):
                    continue
                if not _broad(base, name.strip("/")):
                    hits.append(Hit(kind, name, f"the glob {word!r} matches {name!r}", "high", word))
                elif rooted_out:
                    hits.append(Hit(kind, name, f"the glob {word!r}, outside the workspace, matches {name!r}",
                                    "high", word))
    for directory, cwd in res.listings:
        path = _where(directory, cwd)
        if path in held_dirs:
            hits.append(Hit("held", held_dirs[path], f"lists {directory!r}, the directory of {held_dirs[path]}",
                            "high", directory))
        elif _outside(path) or path == "/" or (path.startswith("/") and any(
                _under(f, path) for _, f in protected.files() + runs)):
            exploring.append(directory)
    if exploring:
        fragments = [w for w, _ in res.words if len(w) >= 4 and not GLOB_CHARS.search(w) and "/" not in w
                     and w not in res.programs]
        for kind, name in protected.names():
            bare = name.strip("/")
            frag = next((f for f in fragments if f != bare and (bare.startswith(f) or bare.endswith(f))), None)
            if frag is not None:
                hits.append(Hit(kind, name, f"lists {exploring[0]!r} and looks for {frag!r} (as in {name!r})",
                                "high", exploring[0]))
        if not hits:
            hits.append(Hit("run", exploring[0], f"lists {exploring[0]!r}, outside its workspace, toward the run's "
                            "files", "warn", exploring[0]))
    return _dedupe(hits)


def _dedupe(hits: Iterable[Hit]) -> list[Hit]:
    seen: set[tuple[str, str]] = set()
    out: list[Hit] = []
    for hit in sorted(hits, key=lambda h: h.severity != "high"):
        if (hit.kind, hit.target) not in seen:
            seen.add((hit.kind, hit.target))
            out.append(hit)
    return out
