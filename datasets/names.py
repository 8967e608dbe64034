"""File and member names that are not UTF-8, and how messages name files without internal paths.

Rule: a file, folder or archive member whose name is
not valid UTF-8 is skipped, never decoded with a guessed code page, and the skipped-files report
names it with every byte that is not UTF-8 written as `\\xNN` (`caf\\xe9.png` for latin-1
`café.png`). Skipping, not guessing, because the name of a class folder becomes a label in
labels.txt, dataset.json and the database, all UTF-8, and a guess (latin-1? cp1252? Shift-JIS?)
would silently make up class names.

Python hands such names over with "surrogate escapes": os.scandir and tarfile (opened with
errors="surrogateescape") turn each undecodable byte into one code point U+DC80..U+DCFF, which
cannot be encoded as UTF-8 again. A zip member flagged UTF-8 with other bytes is found from its raw
bytes (datasets.archives).
"""

from __future__ import annotations

import os
import unicodedata

NOT_UTF8 = "name is not valid UTF-8 (shown with \\x escapes)"
# A class name is one line of labels.txt: a folder named "a\nb" made labels.txt one line longer than
# the classes, and an exported bundle failed to load (size mismatch [7, 500] vs [9, 500]).
CONTROL_CHARACTER = "class name holds a control character such as a line break or a tab (shown escaped)"


def has_control(name: str) -> bool:
    """True for a name with a control character (Cc: line breaks, tabs, NUL, escapes) or a line or
    paragraph separator; format characters (zero-width joiners) are parts of real names."""
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name)


def escaped(name: str) -> str:
    """The name with each control character written as an escape (a\\nb), for messages."""
    return "".join(c.encode("unicode_escape").decode("ascii") if has_control(c) else c for c in name)


def is_utf8(name: str) -> bool:
    """False for a name that holds surrogate escapes (bytes that were not UTF-8)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def readable(name: str | bytes) -> str:
    """The name with each byte that is not UTF-8 as `\\xNN`; a UTF-8 name comes back unchanged."""
    if isinstance(name, str):
        try:
            name = name.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate no decoder made: show its code point
            return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return name.decode("utf-8", "backslashreplace")


def os_error_text(exc: BaseException) -> str:
    """An exception's text without the file name an OSError carries (often a path inside the data
    dir: a temp folder of a build, an upload); other exceptions keep their text."""
    if isinstance(exc, OSError) and (exc.filename is not None or exc.strerror):
        return exc.strerror or (os.strerror(exc.errno) if exc.errno else type(exc).__name__)
    return str(exc) or type(exc).__name__


def without_paths(text: str, replacements: dict[str, str]) -> str:
    """`text` with each internal folder replaced by its public name ("" to make paths relative).

    Longer folders first, so a temp folder inside the data dir is replaced before the data dir.
    """
    for folder in sorted(replacements, key=len, reverse=True):
        if folder:
            public = replacements[folder]
            text = text.replace(folder + os.sep, f"{public}{os.sep}" if public else "").replace(folder, public)
    return text
