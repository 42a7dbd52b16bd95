"""A character cursor over HLO text, and the parse error it raises.

The HLO text format ignores line breaks, so the parser reads tokens from a
cursor that skips whitespace and comments (``/* ... */`` and ``// ...``).
Every error points at the offending spot::

    HloParseError: expected ')' but found '%y'
      at line 3, column 28:
        %a = f32[4] add(%x %y)
                           ^
"""

from __future__ import annotations

import re

NAME_RE = re.compile(r"%?[a-zA-Z_][a-zA-Z0-9_.\-]*")
INT_RE = re.compile(r"-?[0-9]+")
# Whitespace, /* block */ and // line comments, any number of each.
_SPACE_RE = re.compile(r"(?:[ \t\r\n]+|/\*.*?\*/|//[^\n]*)*", re.DOTALL)
_SPACE_START = frozenset(" \t\r\n/")
NUMBER_RE = re.compile(r"-?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)")


class HloParseError(ValueError):
    """Bad HLO text. ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.reason = message
        self.offset = offset
        self.line = text.count("\n", 0, offset) + 1
        line_start = text.rfind("\n", 0, offset) + 1
        line_end = text.find("\n", offset)
        self.column = offset - line_start + 1
        self.source_line = text[line_start : line_end if line_end != -1 else len(text)]
        caret = " " * (self.column - 1) + "^"
        super().__init__(
            f"{message}\n  at line {self.line}, column {self.column}:\n    {self.source_line}\n    {caret}"
        )


class Cursor:
    """Position in the text plus small helpers to read tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    # ---- errors ---------------------------------------------------------------------
    def error(self, message: str, offset: int | None = None) -> HloParseError:
        return HloParseError(message, self.text, self.pos if offset is None else offset)

    def describe_next(self) -> str:
        """A short quote of what comes next, for error messages."""
        self.skip_space()
        if self.pos >= len(self.text):
            return "end of text"
        match = NAME_RE.match(self.text, self.pos) or NUMBER_RE.match(self.text, self.pos)
        token = match.group(0) if match else self.text[self.pos]
        return f"'{token}'"

    # ---- whitespace and comments -----------------------------------------------------
    def skip_space(self) -> None:
        # Called before every token (and again by each peek), so the common case -- already at a
        # token -- returns after one character test; otherwise one regex skips the whole run.
        text, pos = self.text, self.pos
        if pos >= len(text) or text[pos] not in _SPACE_START:
            return
        self.pos = pos = _SPACE_RE.match(text, pos).end()
        if text.startswith("/*", pos):
            raise self.error("unterminated /* comment")

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text)

    # ---- punctuation ----------------------------------------------------------------
    def peek(self, token: str) -> bool:
        self.skip_space()
        return self.text.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str, context: str = "") -> None:
        if not self.accept(token):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{token}'{where} but found {self.describe_next()}")

    # ---- tokens ---------------------------------------------------------------------
    def peek_name(self) -> str | None:
        """The next identifier (without a leading %), not consumed."""
        self.skip_space()
        match = NAME_RE.match(self.text, self.pos)
        return match.group(0).lstrip("%") if match else None

    def name(self, what: str = "a name") -> str:
        self.skip_space()
        match = NAME_RE.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected {what} but found {self.describe_next()}")
        self.pos = match.end()
        return match.group(0).lstrip("%")

    def keyword(self, word: str) -> bool:
        """Consume ``word`` if it is the next whole identifier."""
        self.skip_space()
        match = NAME_RE.match(self.text, self.pos)
        if match and match.group(0) == word:
            self.pos = match.end()
            return True
        return False

    def integer(self, what: str = "an integer") -> int:
        self.skip_space()
        match = INT_RE.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected {what} but found {self.describe_next()}")
        self.pos = match.end()
        return int(match.group(0))

    def string(self) -> str:
        """A double- or single-quoted string with C escapes."""
        self.skip_space()
        start = self.pos
        if self.pos >= len(self.text) or self.text[self.pos] not in "\"'":
            raise self.error(f"expected a string but found {self.describe_next()}")
        quote = self.text[self.pos]
        self.pos += 1
        out: list[str] = []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                out.append(escapes.get(nxt, "\\" + nxt))
                self.pos += 2
                continue
            self.pos += 1
            if ch == quote:
                return "".join(out)
            out.append(ch)
        raise self.error("unterminated string", start)

    def raw_value(self) -> str:
        """Text of one attribute value, balancing (), [], {} and skipping over strings.

        It ends before a top-level ``,`` or a closing bracket, or at whitespace outside brackets.
        """
        self.skip_space()
        start = self.pos
        text, depth = self.text, 0
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in "\"'":
                self.string()
                continue
            if ch in "{([":
                depth += 1
            elif ch in "})]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (ch == "," or ch in " \t\r\n"):
                # XLA's mesh form of replica_groups has one space inside: mesh['x'=2,'y'=2] {'y'}
                if ch == " " and text.startswith("mesh[", start) and text[self.pos - 1] == "]" \
                        and text.startswith("{", self.pos + 1):
                    self.pos += 1
                    continue
                break
            self.pos += 1
        if depth != 0:
            raise self.error("unbalanced brackets in attribute value", start)
        if self.pos == start:
            raise self.error(f"expected an attribute value but found {self.describe_next()}")
        return text[start : self.pos]
