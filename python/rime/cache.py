"""The plan cache, shared with the CLI: what `rime cache ls|show|stats|verify|prune|clear|warm` do (docs/cache.md).

    import rime
    rime.cache.warm([rime.Graph.from_json(open(f).read()) for f in files])   # compile ahead, no GPU needed
    rime.cache.stats()["entries"]

The directory is the process's: rime.set_cache_dir(dir) before the first plan, else RIME_CACHE_DIR, XDG_CACHE_HOME,
HOME. A call without a usable directory raises CacheCorruptError saying why."""
from . import _rime


def directory():
    """The cache's directory ('' when the disk cache is off)."""
    return _rime.cache_dir()


def ls():
    """Every name in the directory, as `rime cache ls --json` lists them: entries (checked with checksums), then foreign
    names (never touched), then the choices rime.tune recorded (kind "tuned", the document under "tuned")."""
    return _rime._cache_ls()


def show(name_or_key):
    """One entry, by its name or a key prefix of at least 4 hex digits (InvalidArgumentError naming the entries when
    none or several match), or a tuned choice by its name (tuned/<key16>.json), as `rime cache show` finds it."""
    return _rime._cache_show(name_or_key)


def stats():
    """dir, entries, invalid, foreign, bytes, max_bytes, compile_ms_saved_per_cold_start."""
    return _rime._cache_stats()


def verify():
    """Recomputes every checksum and moves bad entries to quarantine/: {checked, quarantined, foreign}; a foreign name
    with `blocks_entry` holds an entry's name (remove it yourself: rime never deletes what it did not write)."""
    return _rime._cache_verify()


def prune(max_bytes=None):
    """Evicts least-recently-used entries until at most `max_bytes` (an int, or '512M', '1G'; default the cache's
    cap) remain: {max_bytes, evicted}."""
    if isinstance(max_bytes, str):
        max_bytes = _rime._parse_bytes(max_bytes)
    return _rime._cache_prune(max_bytes)


def clear(tuned=False):
    """Removes every entry (foreign names and live writers' temp directories stay); returns how many. tuned=True:
    removes the choices rime.tune recorded instead (`rime cache clear --tuned`)."""
    return _rime._cache_clear(tuned)


def warm(graphs, arch="sm_90a", sms=132):
    """Compiles every kernel of each graph's plan for `arch` / `sms` (default: the H200) into the cache, without a
    GPU, as `rime cache warm` does. Returns one dict per kernel: graph, kernel, digest, origin, compile_ms, arch."""
    out = []
    for g in graphs:
        p = _rime.plan(g, arch=arch, sms=sms)
        for k in p.kernels:
            out.append({"graph": g.name, "kernel": k["name"], "digest": k["key"][:16], "origin": k["origin"],
                        "compile_ms": k["compile_ms"], "arch": k["arch"]})
    return out
