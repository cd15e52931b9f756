"""The generated part of a Markdown document: the lines between two marker comments, which a report script writes
(--update) or compares with what it would write (--check). heuristics_report.py and perf_table.py use it."""


def markers(script):
    """The begin and end comments of the part `script` generates."""
    return f"<!-- {script}: generated from here -->", f"<!-- {script}: to here -->"


def write_or_check(doc, script, lines, check, regenerate):
    """Replaces the part of `doc` that `script` generates with `lines`, or with check=True only compares: prints
    whether it is current (and `regenerate`, the command, when it is not). Returns the exit status."""
    begin, end = markers(script)
    with open(doc) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise SystemExit(f"{script}: {doc} has no generated part ({begin} ... {end})")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    fresh = head + begin + "\n" + "\n".join(lines) + "\n" + end + tail
    if check:
        if fresh != text:
            print(f"{doc} is stale: regenerate it with {regenerate}")
            return 1
        print(f"{doc} is current")
        return 0
    with open(doc, "w") as f:
        f.write(fresh)
    return 0


def emit(lines, update, check, script, regenerate):
    """A report script's last step: print `lines` when neither --update nor --check names a doc, else write or check
    that doc's generated part (write_or_check; "{doc}" in `regenerate` names it). Returns the exit status."""
    doc = update or check
    if not doc:
        print("\n".join(lines))
        return 0
    return write_or_check(doc, script, lines, check, regenerate.replace("{doc}", doc))
