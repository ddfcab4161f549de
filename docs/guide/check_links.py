#!/usr/bin/env python3
"""Checks the relative links of the user guide's chapters (docs/guide/src/*.md) and of the
repository's README.md, which points into the guide.

For every Markdown link `[text](target)` outside code, where the target is not an absolute URL:
- the file the target names (relative to the chapter) must exist, inside the repository;
- a `#fragment`, on its own or after a Markdown file, must be the id of a heading of that file.

Heading ids follow mdBook's rule: the heading's text without its Markdown (code spans keep their
content, links keep their text), lower-cased, each white-space character turned into '-', and
every character that is neither alphanumeric nor '-' nor '_' dropped; a repeated id gets
"-1", "-2", ... GitHub, which renders the repository's own Markdown files, makes the same ids
for the headings used here.

Also checks that SUMMARY.md lists every chapter and that every file it lists exists.

Usage: python3 docs/guide/check_links.py   (exit status 1 when something is broken)
Standard library only.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or ![alt](target); the target ends at the first space or ')'.
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    out = []
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                out.append((n, line.rstrip("\n")))
    return out


def heading_text(raw):
    """A heading's text as rendered: code spans keep their content, links their text."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("\\", "")
    return re.sub(r"[*_]{1,3}([^*_]+)[*_]{1,3}", r"\1", text)


def normalize_id(text):
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        ids, seen = set(), {}
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = normalize_id(heading_text(m.group(2)))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
        _anchor_cache[path] = ids
    return _anchor_cache[path]


def links(path):
    """(line number, target) of every link outside code."""
    for n, line in prose_lines(path):
        line = CODE_SPAN.sub("", line)
        for m in LINK.finditer(line):
            yield n, m.group(1)


def check_file(path, errors):
    rel = os.path.relpath(path, REPO)
    count = 0
    for n, target in links(path):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:, ...
            continue
        count += 1
        where = f"{rel}:{n}: {target}"
        file_part, _, fragment = target.partition("#")
        if file_part:
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if os.path.commonpath([dest, REPO]) != REPO:
                errors.append(f"{where}: leaves the repository")
                continue
            if not os.path.exists(dest):
                errors.append(f"{where}: no such file {os.path.relpath(dest, REPO)}")
                continue
        else:
            dest = path
        if fragment:
            if not dest.endswith(".md") or os.path.isdir(dest):
                errors.append(f"{where}: an anchor into a file that is not Markdown")
            elif fragment not in anchors(dest):
                known = ", ".join(sorted(anchors(dest))) or "none"
                errors.append(f"{where}: no heading with id '{fragment}' in "
                              f"{os.path.relpath(dest, REPO)} (ids: {known})")
    return count


def check_summary(errors):
    summary = os.path.join(SRC, "SUMMARY.md")
    listed = set()
    for n, target in links(summary):
        listed.add(os.path.normpath(os.path.join(SRC, target.partition("#")[0])))
    for name in sorted(os.listdir(SRC)):
        full = os.path.join(SRC, name)
        if name.endswith(".md") and name != "SUMMARY.md" and full not in listed:
            errors.append(f"docs/guide/src/SUMMARY.md: does not list {name}")


def main():
    errors = []
    chapters = sorted(os.path.join(SRC, n) for n in os.listdir(SRC) if n.endswith(".md"))
    chapters.append(os.path.join(REPO, "README.md"))
    total = sum(check_file(p, errors) for p in chapters)
    check_summary(errors)
    for e in errors:
        print(e)
    print(f"{len(chapters)} files, {total} relative links checked, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
