#!/usr/bin/env python3
"""Fails when a Markdown file of the repository links a file that does not exist.

Every inline link `[text](target)` and reference definition `[label]: target` in README.md and every *.md under
the given roots is resolved relative to the file that holds it (a leading '/' from the repository root); web
links (scheme://, mailto:) and in-page anchors are skipped, a '#fragment' is dropped. Prints each broken link as
FILE:LINE: target, and exits 1 when there is one.
"""
import os
import re
import sys

INLINE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
FENCE = re.compile(r"^\s*(```|~~~)")


def targets(path):
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            # Code spans are text, not links.
            line = re.sub(r"`[^`]*`", "", line)
            for m in INLINE.finditer(line):
                yield number, m.group(1)
            m = REFERENCE.match(line)
            if m:
                yield number, m.group(1)


def broken_links(root, docs):
    for doc in docs:
        for number, target in targets(doc):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            base = root if file_part.startswith("/") else os.path.dirname(doc)
            if not os.path.exists(os.path.normpath(os.path.join(base, file_part.lstrip("/")))):
                yield f"{os.path.relpath(doc, root)}:{number}: {target}"


def self_test():
    """The checker on a tree of its own: one good link, one anchor, one web link, one link in code, two broken."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "here.md"), "w") as f:
            f.write("x\n")
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("[a](docs/here.md) [b](#top) [c](https://example.com/x.md) `[d](missing_in_code.md)`\n"
                    "[e](docs/missing.md#part)\n\n[f]: /nowhere.md\n")
        bad = list(broken_links(root, [os.path.join(root, "README.md")]))
    expected = ["README.md:2: docs/missing.md#part", "README.md:4: /nowhere.md"]
    if bad != expected:
        print(f"self-test: found {bad}, expected {expected}")
        return 1
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    docs = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        docs += [os.path.join(top, f) for f in files if f.endswith(".md")]
    bad = list(broken_links(root, sorted(docs)))
    for line in bad:
        print(line)
    print(f"{len(docs)} Markdown files, {len(bad)} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
