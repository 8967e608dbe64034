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
# A class name is shown in every page, report and labels.txt line: longer than this is a mistake or
# an attack (a 10 MB COCO category name was stored and sent with each gallery page).
MAX_CLASS_NAME = 200
# Nothing inside a source is reached through a symbolic link: class folders, archives' members and
# label readers' files alike (datasets.labels.files); skipped-file reports give this reason.
LINK_NOT_FOLLOWED = "symbolic link not followed"


def has_control(name: str) -> bool:
    """True for a name with a control character (Cc: line breaks, tabs, NUL, escapes) or a line or
    paragraph separator; format characters (zero-width joiners) are parts of real names."""
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name)


def class_name_problem(name: object) -> str | None:
    """Why `name` cannot be a class name, or None: the one rule for class folders, labels files,
    every label format's names and the class table's new names.

    A class name is one line of labels.txt, so no character that str.splitlines() splits at
    (\n, \r, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029: all control characters or separators, the
    test in has_control) nor any other control character; it is text (not a number or a list) and
    UTF-8 (a lone surrogate from a JSON escape cannot be written to labels.txt); it is not empty.
    """
    if not isinstance(name, str):
        return f"class name must be text, not {type(name).__name__}"
    if not name.strip():
        return "class name is empty"
    if len(name) > MAX_CLASS_NAME:
        return f"class name is {len(name)} characters long, more than the {MAX_CLASS_NAME} allowed"
    if has_control(name):
        return CONTROL_CHARACTER
    if not is_utf8(name):
        return "class name is not valid UTF-8 text (it holds a lone surrogate)"
    return None


def name_lines(text: str) -> list[str]:
    """A class list's lines, split at \n (and \r\n) only, stripped, trailing blank ones dropped.
    Not str.splitlines(): it also splits at U+2028, \x1c, \x85..., which the tool that wrote the
    file did not, and would silently shift every later id; those are refused by the class-name rule."""
    names = [line.strip() for line in text.split("\n")]
    while names and not names[-1]:
        names.pop()
    return names


def shown_name(name: str, limit: int = 40) -> str:
    """A class name as a message shows it: control characters escaped, cut after `limit`."""
    if not isinstance(name, str):
        return type(name).__name__
    text = escaped(name if is_utf8(name) else readable(name))
    return text if len(text) <= limit else text[:limit] + "..."


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
