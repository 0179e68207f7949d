"""Rule 1 of the Lean oracle: the text rules a proof body must pass before Lean runs.

Comments and literals are blanked first (:func:`oracle.strip_lean.mask_lean`), so a keyword in a
comment or string is fine; then no command or declaration keyword, no ``sorry``, no native evaluation,
no meta-programming, no unterminated comment or string (it would swallow the audit commands the oracle
appends). Invariant: :func:`proof_violation` returns None only for a body that contains none of them,
whatever its comments, strings, interpolation holes and «quoted» names hide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oracle.strip_lean import IDENT_RE, LeanSyntaxError, mask_lean

# Whole tokens (not after a '.') that may not appear in a proof body.
FORBIDDEN_TOKENS: dict[str, str] = {
    **{kw: "declaration keyword" for kw in (
        "theorem", "lemma", "def", "abbrev", "instance", "example", "structure", "class", "inductive",
        "coinductive", "axiom", "opaque", "mutual", "deriving", "initialize",
        "builtin_initialize", "simproc", "dsimproc")},
    **{kw: "command keyword" for kw in (
        "namespace", "section", "end", "variable", "universe", "import", "export", "omit", "include",
        "declare_syntax_cat", "add_decl_doc", "register_simp_attr", "private", "protected",
        "noncomputable", "nonrec", "scoped", "local")},
    "set_option": "set_option", "open": "open ... in", "attribute": "attribute",
    "macro": "macro", "macro_rules": "macro", "elab": "elab", "elab_rules": "elab",
    "syntax": "syntax", "notation": "notation", "infix": "notation", "infixl": "notation",
    "infixr": "notation", "prefix": "notation", "postfix": "notation",
    "run_cmd": "meta-programming", "run_tac": "meta-programming", "run_elab": "meta-programming",
    "run_meta": "meta-programming", "by_elab": "meta-programming",
    "sorry": "sorry", "admit": "sorry", "stop": "sorry", "sorryAx": "sorry",
    "implemented_by": "implemented_by", "extern": "extern", "unsafe": "unsafe", "partial": "partial",
    "native_decide": "native evaluation",
    # elaborators that read files: the stripped source (with its original proofs) is a file too
    "include_str": "reads a file", "include_bytes": "reads a file",
    **{kw: "command keyword" for kw in (
        "unif_hint", "binder_predicate", "seal", "unseal", "grind_pattern", "recommended_spelling", "init_quot",
        "declare_simp_like_tactic", "declare_config_elab", "register_option", "register_builtin_option",
        "register_label_attr", "register_tactic_tag", "tactic_extension", "builtin_simproc", "builtin_dsimproc",
        "simproc_decl", "dsimproc_decl", "builtin_simproc_decl", "builtin_dsimproc_decl",
        "gen_injective_theorems", "irreducible_def", "library_note", "module", "prelude", "opaque_def")},
}
# `set_option NAME VALUE in` is allowed for these options only (resource limits, printing, linters)
ALLOWED_OPTIONS = ("maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize",
                   "maxSteps")
ALLOWED_OPTION_PREFIXES = ("pp.", "linter.")
_OPEN_IN = re.compile(r"\bopen(?P<body>(?:[ \t]+(?:scoped|hiding|renaming|→|[(]|[)]|(?!in\b)[^\W\d][\w.'!?]*))+?)"
                      r"[ \t]+in\b")
_SET_OPTION_IN = re.compile(r"\bset_option[ \t]+(?P<name>[^\W\d][\w.]*)[ \t]+(?P<value>true|false|\d+)[ \t]+in\b")
# Parts of dotted names that are forbidden wherever they appear (``Lean.ofReduceBool``).
FORBIDDEN_NAME_PARTS: dict[str, str] = {
    "ofReduceBool": "native evaluation", "ofReduceNat": "native evaluation",
    "reduceBool": "native evaluation", "reduceNat": "native evaluation",
    "trustCompiler": "native evaluation", "skipKernelTC": "kernel-skipping option",
    "implemented_by": "implemented_by", "sorryAx": "sorry",
}

NATIVE_NAME_PARTS = frozenset({"native", "native_decide", "nativeDecide", "_native"})


@dataclass(frozen=True)
class RuleViolation:
    rule: str  # short rule name ("sorry", "declaration keyword", "native evaluation", ...)
    token: str  # the offending text
    line: int  # 1-based line in the proof body

    @property
    def reason(self) -> str:
        return f"forbidden in proof ({self.rule}): `{self.token}` at proof line {self.line}"


def proof_violation(proof: str) -> RuleViolation | None:
    """The first text rule a proof body breaks, or None. Strict, but blind to comments/strings."""
    if not proof.strip():
        return RuleViolation("empty proof", "", 1)
    bad = next((ch for ch in proof if ch == "\x00" or (ord(ch) < 32 and ch not in "\n\t\r")), None)
    if bad is not None:
        return RuleViolation("control character", repr(bad), proof[: proof.index(bad)].count("\n") + 1)
    try:
        masked = mask_lean(proof)
    except LeanSyntaxError as exc:  # it would swallow the audit commands appended after the proof
        return RuleViolation("unterminated comment or string", str(exc).split(" starting")[0], exc.line or 1)
    # where an interpolated string may hide code in its holes, comments and literals are read too
    code = _unquote_names(proof) if masked.braces_in_strings else masked.code

    def line_at(i: int) -> int:
        return code.count("\n", 0, i) + 1

    # `open Foo in tac` and `set_option maxHeartbeats N in tac` scope a name space or a limit to one
    # tactic or term: allowed (a bare `open` or any other option stays forbidden)
    for m in _OPEN_IN.finditer(code):
        code = code[: m.start()] + " " * (m.end() - m.start()) + code[m.end():]
    for m in _SET_OPTION_IN.finditer(code):
        option = m.group("name")
        if option in ALLOWED_OPTIONS or option.startswith(ALLOWED_OPTION_PREFIXES):
            code = code[: m.start()] + " " * (m.end() - m.start()) + code[m.end():]

    for m in re.finditer(r"@\[|#(?=[^\W\d])", code):
        tok = "@[" if m.group(0) == "@[" else "#" + (IDENT_RE.match(code, m.end()) or m).group(0).lstrip("#")
        return RuleViolation("attribute" if tok == "@[" else "# command", tok, line_at(m.start()))
    for m in IDENT_RE.finditer(code):
        word = m.group(0)
        after_dot = m.start() > 0 and code[m.start() - 1] == "."  # a field access, not a keyword
        if not after_dot and word in FORBIDDEN_TOKENS:
            return RuleViolation(FORBIDDEN_TOKENS[word], word, line_at(m.start()))
        # «quoted» name parts are names like any other: `«sorryAx»` is `sorryAx`
        parts = _name_parts(proof[m.start():m.end()]) if "«" in proof[m.start():m.end()] else word.split(".")
        shown = proof[m.start():m.end()]
        for part in parts:
            if part in FORBIDDEN_NAME_PARTS:
                return RuleViolation(FORBIDDEN_NAME_PARTS[part], shown, line_at(m.start()))
            # native_decide, decide +native, foo._native.native_decide.ax_1_1 (a user lemma that is
            # merely *named* native_fact passes here; the axiom audit judges what it depends on)
            if part in NATIVE_NAME_PARTS or part.startswith("_native"):
                return RuleViolation("native evaluation", shown, line_at(m.start()))
    return None


def _name_parts(name: str) -> list[str]:
    """The components of a dotted name, «quotes» removed (``Lean.«ofReduceBool»`` -> Lean, ofReduceBool)."""
    return [p.strip("«»") for p in re.findall(r"«[^»]*»|[^.«»]+", name)]


def _unquote_names(text: str) -> str:
    """``text`` with each «quoted name» written plainly (same length: the guillemets become ``_``)."""
    return re.sub(r"«([^»\n]*)»", lambda m: "_" + m.group(1) + "_", text)
