"""Strip a Lean 4 file into theorem tasks: the parser half of strip-and-rediscover for Lean.

Why it exists: the Lean bench (and ``bench lean --source FILE``) turns any user file into one
:class:`~oracle.proof_common.TheoremTask` per named ``theorem``/``lemma``: the file text before
the declaration (the context: imports, ``open``s, earlier definitions and lemmas with their proofs
intact, so earlier lemmas stay usable and axiom-free), the exact statement, and the hidden
original proof. :func:`sorried_source` gives the whole file with every stripped proof replaced by
``sorry`` (what a person sees of the task).

Statement and proof: for ``theorem foo (n : Nat) : n = n := by rfl`` the statement is
``theorem foo (n : Nat) : n = n :=`` (the ``:=`` included) and the proof is ``by rfl``: the
proof is the *term* after ``:=`` (usually a ``by`` tactic block). For equation-style theorems
(``theorem foo : ∀ n, P n`` followed by ``| 0 => ...`` alternatives) the statement stops before
the first ``|`` and the proof is the alternatives. :func:`assemble` is the one place that glues a
statement and a proof back together.

The lexer (:func:`mask_lean`) is shared with the oracle's anti-cheat rules in :mod:`oracle.lean`:
it blanks comments (nested ``/- -/``, ``--``), string and char literals and «quoted» names, keeping
every offset, so keywords are only ever matched in code. A command boundary is a line whose first
code token starts a command (``theorem``, ``def``, ``namespace``, ``@[``, a doc comment, ...);
``open``/``set_option`` count only at or left of the current command's column (inside a proof they
are tactics), and a ``... in`` prefix or a bare attribute/doc comment is merged into the command
that follows it. Known limits: a ``:=`` at bracket depth 0 inside a statement (``let x := 1; ...``
in the type) is taken as the start of the proof; theorems inside ``mutual`` blocks and
``example``s (no name to audit) are skipped.

Invariant: for every task, ``context + statement`` is a prefix of the source file, and the
original proof is the source text that follows it (after blanks), so the original proof checks
wherever the source file does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from oracle.proof_common import TheoremTask

DIFFICULTIES = ("easy", "medium", "hard")

# Tokens that can only begin a command (never a tactic or term line).
COMMAND_KEYWORDS = frozenset({
    "theorem", "lemma", "def", "abbrev", "instance", "example", "structure", "class", "inductive",
    "coinductive", "axiom", "opaque", "namespace", "section", "end", "variable", "universe", "mutual",
    "import", "macro", "macro_rules", "syntax", "elab", "elab_rules", "notation", "infix", "infixl",
    "infixr", "prefix", "postfix", "deriving", "initialize", "builtin_initialize", "private",
    "protected", "noncomputable", "partial", "unsafe", "nonrec", "attribute", "export", "omit",
    "include", "declare_syntax_cat", "add_decl_doc", "run_cmd", "run_elab", "run_meta", "scoped",
    "local", "simproc", "dsimproc", "register_simp_attr", "public", "meta",
    "unif_hint", "binder_predicate", "seal", "unseal", "grind_pattern", "recommended_spelling", "init_quot",
    "declare_simp_like_tactic", "declare_config_elab", "register_option", "register_builtin_option",
    "register_label_attr", "register_tactic_tag", "tactic_extension", "builtin_simproc", "builtin_dsimproc",
    "simproc_decl", "dsimproc_decl", "builtin_simproc_decl", "builtin_dsimproc_decl", "gen_injective_theorems",
    "irreducible_def", "library_note", "module", "prelude",
})
# Tokens that begin a command at top level but are also tactics (``open Nat in simp``).
AMBIGUOUS_COMMAND_KEYWORDS = frozenset({"open", "set_option"})
MODIFIERS = frozenset({"private", "protected", "noncomputable", "partial", "unsafe", "nonrec", "public",
                       "meta", "scoped", "local"})
THEOREM_KEYWORDS = frozenset({"theorem", "lemma"})

_IDENT_START = r"[^\W\d]|_"  # a letter (any script) or underscore
_IDENT_CHARS = r"[\w'!?\u2080-\u209c\u1d62-\u1d6a\u2071\u207f]"
IDENT_RE = re.compile(rf"(?:{_IDENT_START}|«_*»)(?:{_IDENT_CHARS}|«_*»)*(?:\.(?:(?:{_IDENT_START}|«_*»)(?:{_IDENT_CHARS}|«_*»)*|\d+))*")
_CHAR_LITERAL_RE = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
_DIFFICULTY_RE = re.compile(r"difficulty\s*[:=]\s*([A-Za-z]+)")
_BLANKS_RE = re.compile(r"\s+")
_IN_PREFIX_RE = re.compile(r".*?(?<![\w'.])in(?![\w'!?])", re.S)
_OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "⁅": "⁆"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}


class LeanSyntaxError(ValueError):
    """The text cannot be lexed as Lean (an unterminated comment, string or «name»)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line  # 1-based line where the offending token starts (0: unknown)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _is_ident_char(ch: str) -> bool:
    return bool(ch) and (ch.isalnum() or ch in "_'!?." or "\u2080" <= ch <= "\u209c")


@dataclass(frozen=True)
class Comment:
    start: int
    end: int  # just past the comment
    kind: str  # "line", "block", "doc" (/-- -/) or "module" (/-! -/)


@dataclass(frozen=True)
class Masked:
    """``code`` is the source with comments, literals and «names» blanked (same length, same newlines)."""

    source: str
    code: str
    comments: tuple[Comment, ...]
    # a string literal holds a brace: it may be an interpolated string (`s!"{...}"`, `throwError
    # "...{e}"`), whose holes are code a plain lexer would blank, and after which quotes pair up
    # differently; the text rules then read the whole source instead of ``code``
    braces_in_strings: bool = False


def mask_lean(text: str) -> Masked:
    """Blank out comments, string/char literals and «quoted names», keeping offsets and newlines.

    Raises :class:`LeanSyntaxError` (with the line) for an unterminated block comment, string or
    «name»: such text would swallow whatever the oracle appends after it.
    """
    out = list(text)
    comments: list[Comment] = []
    n = len(text)
    i = 0
    braces = False

    def blank(a: int, b: int, keep: str = "") -> None:
        for k in range(a, b):
            if out[k] not in "\n\r" and (not keep or k not in (a, b - 1)):
                out[k] = " "

    while i < n:
        ch = text[i]
        if ch == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append(Comment(i, j, "line"))
            blank(i, j)
            i = j
        elif ch == "/" and text.startswith("//", i):
            i += 2  # the token `//` (Subtype's `{ x // p x }`): a `-` after it does not open a comment
        elif ch == "/" and text.startswith("/-", i):
            kind = "doc" if text.startswith("/--", i) and not text.startswith("/--/", i) else (
                "module" if text.startswith("/-!", i) else "block")
            depth, j = 0, i
            while j < n:
                if text.startswith("/-", j):
                    depth += 1
                    j += 2
                elif text.startswith("-/", j):
                    depth -= 1
                    j += 2
                    if depth == 0:
                        break
                else:
                    j += 1
            if depth != 0:
                raise LeanSyntaxError(f"unterminated comment starting at line {_line_of(text, i)}", _line_of(text, i))
            comments.append(Comment(i, j, kind))
            blank(i, j)
            i = j
        elif ch == '"' or (ch == "r" and re.match(r'r#*"', text[i:i + 64] or "") and not _is_ident_char(text[i - 1] if i else "")):
            if ch == "r":  # raw string r"..." or r#"..."#
                hashes = len(re.match(r'r(#*)"', text[i:]).group(1))  # type: ignore[union-attr]
                close = '"' + "#" * hashes
                j = text.find(close, i + 2 + hashes)
                if j < 0:
                    raise LeanSyntaxError(f"unterminated raw string starting at line {_line_of(text, i)}", _line_of(text, i))
                j += len(close)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                if j >= n:
                    raise LeanSyntaxError(f"unterminated string starting at line {_line_of(text, i)}", _line_of(text, i))
                j += 1
                braces = braces or "{" in text[i:j] or "}" in text[i:j]
            blank(i, j, keep='"')
            i = j
        elif ch == "'" and not _is_ident_char(text[i - 1] if i else ""):
            m = _CHAR_LITERAL_RE.match(text, i)
            if m:
                blank(i, m.end(), keep="'")
                i = m.end()
            else:
                i += 1
        elif ch == "«":
            j = text.find("»", i + 1)
            if j < 0:
                raise LeanSyntaxError(f"unterminated «name» starting at line {_line_of(text, i)}", _line_of(text, i))
            for k in range(i + 1, j):
                out[k] = "_" if text[k] not in "\n\r" else text[k]
            i = j + 1
        else:
            i += 1
    return Masked(text, "".join(out), tuple(comments), braces)


# ----------------------------------------------------------------------------- commands


@dataclass
class Command:
    start: int  # offset of the command (its doc comment, attributes or first keyword)
    column: int
    keyword: str  # the first code token ("theorem", "@[", "#check", "/--", ...)
    end: int = 0  # offset of the next command's start (or end of file)
    code_end: int = 0  # just past the command's last code character


def _first_token(code: str, pos: int) -> str:
    if code.startswith("@[", pos):
        return "@["
    if code.startswith("#", pos):
        m = IDENT_RE.match(code, pos + 1)
        return "#" + m.group(0) if m else "#"
    m = IDENT_RE.match(code, pos)
    return m.group(0) if m else code[pos]


def split_commands(masked: Masked) -> list[Command]:
    """Cut a file into top-level commands (see the module docstring for the boundary rule)."""
    text, code = masked.source, masked.code
    doc_starts = {c.start for c in masked.comments if c.kind in ("doc", "module")}
    comment_starts = {c.start for c in masked.comments if c.kind in ("line", "block")}
    commands: list[Command] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        stripped = body.lstrip(" \t")
        column = len(body) - len(stripped)
        pos = offset + column
        offset += len(line)
        if not stripped:
            continue
        if pos in doc_starts:
            keyword = "/--" if text.startswith("/--", pos) else "/-!"
        elif code[pos] in " \t":
            # the line starts inside a comment or literal; a comment that opens here and closes on
            # this line may be followed by code (`/- note -/ theorem foo ...`)
            if pos not in comment_starts:
                continue
            rest = code[pos:offset].rstrip("\r\n")
            code_at = len(rest) - len(rest.lstrip(" \t"))
            if code_at >= len(rest):
                continue
            pos += code_at
            column += code_at
            keyword = _first_token(code, pos)
        else:
            keyword = _first_token(code, pos)
        current_col = commands[-1].column if commands else 0
        starts = (
            keyword in COMMAND_KEYWORDS
            or keyword in ("@[", "/--", "/-!")
            or (keyword.startswith("#") and len(keyword) > 1)
            or (keyword in AMBIGUOUS_COMMAND_KEYWORDS and (not commands or column <= current_col))
        )
        if starts:
            commands.append(Command(start=pos, column=column, keyword=keyword))
    for k, cmd in enumerate(commands):
        cmd.end = commands[k + 1].start if k + 1 < len(commands) else len(text)
        region = code[cmd.start:cmd.end]
        cmd.code_end = cmd.start + len(region.rstrip())
    return _merge_prefixes(masked, commands)


_PREFIX_ONLY_RE = re.compile(r"^(?:@\[[^\]]*\]|\s|" + "|".join(sorted(MODIFIERS)) + r")*$")


def _merge_prefixes(masked: Masked, commands: list[Command]) -> list[Command]:
    """Merge doc comments, bare attributes/modifiers and ``open X in``/``set_option o v in`` prefixes
    into the command that follows them."""
    merged: list[Command] = []
    pending: Command | None = None
    for cmd in commands:
        if pending is not None:
            cmd = Command(start=pending.start, column=pending.column, keyword=cmd.keyword, end=cmd.end,
                          code_end=cmd.code_end)
            pending = None
        region = masked.code[cmd.start:cmd.end]
        is_prefix = (
            cmd.keyword == "/--" and not region.strip()
        ) or (
            cmd.keyword in ("@[", *MODIFIERS) and bool(_PREFIX_ONLY_RE.match(region))
        ) or (
            cmd.keyword in AMBIGUOUS_COMMAND_KEYWORDS and re.search(r"(?<![\w'.])in\s*$", region) is not None
        )
        if is_prefix and cmd is not commands[-1]:
            pending = cmd
        else:
            merged.append(cmd)
    if pending is not None:
        merged.append(pending)
    return merged


# ----------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class ProofSplit:
    keyword: str  # theorem | lemma
    name: str  # as written (may be dotted or _root_.-prefixed)
    proof_start: int  # offset of the first proof character
    statement_end: int  # statement = source[decl_start:statement_end]
    equation_style: bool  # proof is `| pat => ...` alternatives (no `:=`)


def _declaration_head(code: str, start: int, end: int) -> tuple[str, int] | None:
    """Skip attributes, modifiers and ``... in`` prefixes; return (keyword, offset after it)."""
    pos = start
    while pos < end:
        m = _BLANKS_RE.match(code, pos)
        if m:
            pos = m.end()
            continue
        if code.startswith("@[", pos):
            depth, j = 0, pos + 1
            while j < end:
                if code[j] == "[":
                    depth += 1
                elif code[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            pos = j + 1
            continue
        tok = _first_token(code, pos)
        if tok in MODIFIERS:
            pos += len(tok)
            continue
        if tok in AMBIGUOUS_COMMAND_KEYWORDS:  # `open Foo in` / `set_option x v in`
            m = _IN_PREFIX_RE.match(code, pos)
            if m is None:
                return None
            pos = m.end()
            continue
        return tok, pos + len(tok)
    return None


def split_declaration(masked: Masked, cmd: Command) -> ProofSplit | None:
    """For a ``theorem``/``lemma`` command, find its name and where its proof starts."""
    code = masked.code
    head = _declaration_head(code, cmd.start, cmd.code_end)
    if head is None or head[0] not in THEOREM_KEYWORDS:
        return None
    keyword, pos = head
    m = _BLANKS_RE.match(code, pos)
    pos = m.end() if m else pos
    name_match = IDENT_RE.match(code, pos)
    if name_match is None:
        return None
    name = masked.source[name_match.start():name_match.end()]
    depth = 0
    i = name_match.end()
    line_start = True
    while i < cmd.code_end:
        ch = code[i]
        if ch == "\n":
            line_start = True
            i += 1
            continue
        if ch in " \t\r":
            i += 1
            continue
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
        elif depth == 0 and code.startswith(":=", i):
            j = i + 2  # the proof starts at the first non-blank source character (a comment counts)
            while j < cmd.code_end and masked.source[j] in " \t\r\n":
                j += 1
            return ProofSplit(keyword, name, j, i + 2, equation_style=False)
        elif depth == 0 and ch == "|" and line_start and not code.startswith("||", i):
            stmt_end = i
            while stmt_end > cmd.start and code[stmt_end - 1] in " \t\r\n":
                stmt_end -= 1
            return ProofSplit(keyword, name, i, stmt_end, equation_style=True)
        line_start = False
        i += 1
    return None


def assemble(statement: str, proof: str) -> str:
    """The declaration text Lean checks: the fixed statement followed by the agent's proof."""
    proof = proof.strip("\n")
    if statement.rstrip().endswith(":="):
        return f"{statement.rstrip()} {proof.lstrip(' ')}"
    return f"{statement.rstrip()}\n{proof}"


def reference_declaration(statement: str) -> str:
    """The statement closed by ``sorry``: elaborated once to learn the statement's exact type."""
    stmt = statement.rstrip()
    return f"{stmt} sorry" if stmt.endswith(":=") else f"{stmt} := sorry"


def _difficulty(text: str, comments: tuple[Comment, ...], lo: int, hi: int) -> str:
    level = "unknown"
    for c in comments:
        if lo <= c.start < hi:
            for m in _DIFFICULTY_RE.finditer(text, c.start, c.end):
                value = m.group(1).lower()
                level = value if value in DIFFICULTIES else level
    return level


def _scope_names(tokens: list[str]) -> list[str]:
    return [part for tok in tokens for part in tok.split(".") if part]


def strip_lean_source(text: str, source_file: str = "<string>") -> list[TheoremTask]:
    """One task per named ``theorem``/``lemma`` of ``text`` (see the module docstring)."""
    masked = mask_lean(text)
    code = masked.code
    commands = split_commands(masked)
    tasks: list[TheoremTask] = []
    scopes: list[tuple[str, list[str]]] = []  # (kind, namespace components it added)
    prev_code_end = 0
    for cmd in commands:
        head = _declaration_head(code, cmd.start, cmd.code_end)
        keyword = head[0] if head else cmd.keyword
        words = code[head[1] if head else cmd.start:cmd.code_end].split()
        if keyword == "namespace" and words:
            scopes.append(("namespace", _scope_names(words[:1])))
        elif keyword == "section":
            scopes.append(("section", []))
        elif keyword == "mutual":
            scopes.append(("mutual", []))
        elif keyword == "end":
            ended = _scope_names(words[:1]) if words else []
            # `end A.B` closes namespace A.B (one scope); a bare `end` closes a section or mutual
            if scopes and (not ended or scopes[-1][1] == ended or scopes[-1][0] != "namespace"):
                scopes.pop()
        elif keyword in THEOREM_KEYWORDS and not any(kind == "mutual" for kind, _ in scopes):
            split = split_declaration(masked, cmd)
            if split is not None:
                name = split.name
                if name.startswith("_root_."):
                    full = name[len("_root_."):]
                else:
                    prefix = [p for _, parts in scopes for p in parts]
                    full = ".".join([*prefix, name])
                difficulty = _difficulty(text, masked.comments, prev_code_end, split.proof_start)
                tasks.append(TheoremTask(
                    name=full,
                    statement=text[cmd.start:split.statement_end],
                    context=text[:cmd.start],
                    original_proof=text[split.proof_start:cmd.code_end],
                    difficulty=difficulty,
                    prover="lean",
                    source_file=source_file,
                    line=_line_of(text, cmd.start),
                ))
        prev_code_end = cmd.code_end
    return tasks


def strip_lean_file(path: str | Path) -> list[TheoremTask]:
    """Read a ``.lean`` file and strip it; errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"Lean source {p} does not exist or is not a file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LeanSyntaxError(f"{p}: not UTF-8 text ({exc})") from exc
    try:
        return strip_lean_source(text, source_file=str(p))
    except LeanSyntaxError as exc:
        raise LeanSyntaxError(f"{p}: {exc}", exc.line) from exc


def sorried_source(text: str) -> str:
    """The file with every strippable proof replaced by ``sorry`` (what agents are asked to fill)."""
    out: list[str] = []
    cursor = 0
    for task in strip_lean_source(text):
        stmt_start = len(task.context)
        stmt_end = stmt_start + len(task.statement)
        proof_end = text.index(task.original_proof, stmt_end) + len(task.original_proof)
        out.append(text[cursor:stmt_start])
        out.append(reference_declaration(task.statement))
        cursor = proof_end
    out.append(text[cursor:])
    return "".join(out)


def project_theorem_files(project_dir: str | Path) -> list[Path]:
    """The ``.lean`` files of a Lake project's theorem library (``Theorems/*.lean``), sorted."""
    root = Path(project_dir) / "Theorems"
    return sorted(root.glob("*.lean"))


def strip_project(project_dir: str | Path) -> list[TheoremTask]:
    """All theorems of ``project_dir/Theorems/*.lean`` in file order."""
    files = project_theorem_files(project_dir)
    if not files:
        raise FileNotFoundError(f"no Theorems/*.lean files under {project_dir}")
    tasks: list[TheoremTask] = []
    for f in files:
        tasks.extend(strip_lean_file(f))
    return tasks


__all__ = [
    "LeanSyntaxError",
    "Masked",
    "assemble",
    "mask_lean",
    "project_theorem_files",
    "reference_declaration",
    "sorried_source",
    "split_commands",
    "strip_lean_file",
    "strip_lean_source",
    "strip_project",
]
