"""Text for a terminal that the cluster or the user wrote: shown, never obeyed.

Names, reasons and messages come from whoever can write an object's status, and file names
from whoever made the snapshot. Printed raw, an ESC sequence clears the screen or retitles the
window, a CR or BS overwrites what was printed before, a bidi override makes `main` read as
`niam`, and a newline forges a report line of its own. Every text renderer (the analyze
report, every stderr message, the text log format) splits what it prints into lines with
`lines_of`, indents continuation lines, and passes each line through `printable`; only its own
styling (colour) is added after.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_LAYOUT = re.compile(f"(?![\t\n\r]){_UNSAFE.pattern}")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """One line: every C0/C1 control character (newline included), line and paragraph
    separator and bidi control spelled out as an escape (`\\x1b`, `\\n`, `\\u202e`)."""
    return _UNSAFE.sub(_escape, text)


def printable_layout(text: str) -> str:
    """As `printable`, but tab, newline and CR kept: for a medium where they only lay text out
    and cannot overwrite it (HTML, where the page wraps messages at their newlines)."""
    return _UNSAFE_BUT_LAYOUT.sub(_escape, text)


def lines_of(text: str) -> list[str]:
    """A message's lines, split at newlines only (CRLF counts as one); every other control
    character stays in its line for `printable` to spell out."""
    return text.replace("\r\n", "\n").split("\n")


def stderr_lines(message: str) -> list[str]:
    """A message for stderr as printable lines: continuation lines are indented under the
    first, so no line of a message can pass for a message of its own."""
    first, *rest = lines_of(message)
    return [printable(first), *(printable(f"  {line}") for line in rest)]


def complain(message: str) -> None:
    """One message on stderr as `stderr_lines`; nothing when stderr is closed (`2>&-`), where
    print() would silently pick stdout instead."""
    if sys.stderr is not None:
        for line in stderr_lines(message):
            print(line, file=sys.stderr)


def write_stdout(text: str) -> str:
    """Write `text` to stdout and flush it: "" once all of it is written, else why not, in one
    line (a closed pipe, a full disk, stdout closed). After a failure stdout is /dev/null, so
    that the interpreter's own flush at exit cannot fail again and print a traceback."""
    stream = sys.stdout
    if stream is None:
        return "stdout is closed"
    try:
        stream.write(text)
        stream.flush()
    except OSError as error:
        with contextlib.suppress(OSError, ValueError):  # not a file descriptor (a test's capture)
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return error.strerror or str(error) or type(error).__name__
    return ""
