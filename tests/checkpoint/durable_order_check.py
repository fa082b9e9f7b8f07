#!/usr/bin/env python3
"""Checks the order of a save's durable writes in a log of fsync_recorder.cc (LD_PRELOAD).

    durable_order_check.py LOG ROOT   every event under ROOT (a folder) is checked; exit 1 naming
                                      each violation, else a summary line ending in "order ok"
    durable_order_check.py --self-test

A crash (power loss, kernel panic; not SIGKILL, after which the page cache still reaches the disk)
keeps what was fsynced. So, for every file and folder under ROOT:
  - a file renamed was fsynced after it was last opened for writing, before the rename;
  - a rename is made durable by an fsync of its folder(s) after it: before the same thread renames
    another file, before `latest` is replaced, and before the log ends;
  - a folder renamed (the staging folder's commit) was fsynced after its last entry was created or
    renamed, and every file written under it was fsynced, before the rename;
  - `latest` is replaced only once every earlier rename is durable.
Files and folders are identified by device and inode (the recorder's DEV:INO), so an fsync through
a descriptor opened before the rename counts for the file it names.
"""
import os
import sys


class Rename:
    def __init__(self, line, source, target, folders):
        self.line, self.source, self.target = line, source, target
        self.waiting = set(folders)  # folders not fsynced since the rename


def under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def check(lines, root):
    """The violations (strings) of the log's lines, and counts of what was seen."""
    errors = []
    dirty = {}  # file identity -> (line, path) opened for writing, not fsynced since
    entries = {}  # folder identity -> [(line, what)] entries created or renamed since its fsync
    renames = []  # every rename, in order
    pending = {}  # folder identity -> [Rename] waiting for its fsync
    last_file_rename = {}  # (pid, tid) -> Rename of a file
    counts = {"files": 0, "folders": 0, "latest": 0, "fsyncs": 0}

    def add_entry(folder, line, what):
        entries.setdefault(folder, []).append((line, what))

    for number, text in enumerate(lines, 1):
        fields = text.rstrip("\n").split("\t")
        kind = fields[0]
        if kind == "open" and len(fields) == 7:
            _, _, _, ident, what, parent, path = fields
            if not under(path, root) or what != "f":
                continue
            dirty[ident] = (number, path)
            add_entry(parent, number, "created " + path)
        elif kind == "mkdir" and len(fields) == 7:
            _, _, _, ident, _, parent, path = fields
            if under(path, root):
                add_entry(parent, number, "made " + path)
        elif kind == "fsync" and len(fields) == 6:
            _, _, _, ident, what, path = fields
            if not under(path, root):
                continue
            counts["fsyncs"] += 1
            dirty.pop(ident, None)
            if what == "d":
                entries.pop(ident, None)
                for rename in pending.pop(ident, []):
                    rename.waiting.discard(ident)
        elif kind == "rename" and len(fields) == 9:
            _, pid, tid, ident, what, source_parent, target_parent, source, target = fields
            if not (under(source, root) or under(target, root)):
                continue
            rename = Rename(number, source, target, {source_parent, target_parent})
            moved = f"{source} -> {target} (line {number})"
            if what == "f":
                counts["files"] += 1
                if ident in dirty:
                    opened = dirty[ident][0]
                    errors.append(f"{moved}: renamed before it was fsynced (opened for writing "
                                  f"at line {opened}, no fsync of it since)")
                previous = last_file_rename.get((pid, tid))
                if previous is not None and previous.waiting:
                    errors.append(f"{moved}: the thread's previous rename {previous.source} -> "
                                  f"{previous.target} (line {previous.line}) was not yet durable "
                                  f"(no fsync of its folder after it)")
                last_file_rename[(pid, tid)] = rename
            else:
                counts["folders"] += 1
                for line, entry in entries.get(ident, []):
                    errors.append(f"{moved}: the folder was renamed before an fsync of it made "
                                  f"its entry durable ({entry}, line {line})")
                for line, path in sorted(v for v in dirty.values() if under(v[1], source)):
                    errors.append(f"{moved}: the folder was renamed while {path} (opened for "
                                  f"writing at line {line}) was not fsynced")
                for key, (line, path) in list(dirty.items()):
                    if under(path, source):
                        dirty[key] = (line, target + path[len(source):])
            if os.path.basename(target) == "latest":
                counts["latest"] += 1
                for earlier in renames:
                    if earlier.waiting:
                        errors.append(f"{moved}: `latest` replaced while the rename "
                                      f"{earlier.source} -> {earlier.target} (line {earlier.line}) "
                                      f"was not yet durable (no fsync of its folder after it)")
            add_entry(target_parent, number, "renamed " + target)
            if source_parent != target_parent:
                add_entry(source_parent, number, "renamed away " + source)
            for folder in rename.waiting:
                pending.setdefault(folder, []).append(rename)
            renames.append(rename)
    for rename in renames:
        if rename.waiting:
            errors.append(f"{rename.source} -> {rename.target} (line {rename.line}): never made "
                          f"durable (no fsync of its folder after it)")
    return errors, counts


def self_test():
    """The rules on a good save and on each planted defect."""
    root = "/r"
    ids = {"/r": "1:1", "/r/.tmp-c": "1:2", "/r/.tmp-c/s.tmp": "1:3", "/r/.tmp-c/i.tmp": "1:4",
           "/r/.tmp-c/config.json": "1:5", "/r/latest.tmp": "1:6"}

    def parent(path):
        return ids[os.path.dirname(path)]

    def opened(path):
        return f"open\t1\t1\t{ids[path]}\tf\t{parent(path)}\t{path}"

    def synced(path, what="f"):
        return f"fsync\t1\t1\t{ids[path]}\t{what}\t{path}"

    def moved(source, target, what="f"):
        ident = ids[source]
        return f"rename\t1\t1\t{ident}\t{what}\t{parent(source)}\t{ids[os.path.dirname(target)]}" \
               f"\t{source}\t{target}"

    made = f"mkdir\t1\t1\t{ids['/r/.tmp-c']}\td\t{ids['/r']}\t/r/.tmp-c"
    shard_synced, shard_renamed = synced("/r/.tmp-c/s.tmp"), moved("/r/.tmp-c/s.tmp", "/r/.tmp-c/s")
    config_synced, staging_synced = synced("/r/.tmp-c/config.json"), synced("/r/.tmp-c", "d")
    committed, root_synced = moved("/r/.tmp-c", "/r/c", "d"), synced("/r", "d")
    good = [made, opened("/r/.tmp-c/s.tmp"), shard_synced, shard_renamed, staging_synced,
            opened("/r/.tmp-c/i.tmp"), synced("/r/.tmp-c/i.tmp"),
            moved("/r/.tmp-c/i.tmp", "/r/.tmp-c/i"), staging_synced,
            opened("/r/.tmp-c/config.json"), config_synced, staging_synced, committed, root_synced,
            opened("/r/latest.tmp"), synced("/r/latest.tmp"),
            moved("/r/latest.tmp", "/r/latest"), root_synced]
    errors, counts = check(good, root)
    assert not errors, errors
    assert counts == {"files": 3, "folders": 1, "latest": 1, "fsyncs": 9}, counts

    def edited(remove=(), move=None):
        """`good` without the lines at the indices in `remove`, and (line, anchor) moved."""
        lines = [line for i, line in enumerate(good) if i not in remove]
        if move:
            lines.remove(move[0])
            lines.insert(lines.index(move[1]) + 1, move[0])
        return lines

    defects = {
        "the shard's fsync removed": (edited({2}), "s.tmp -> /r/.tmp-c/s (line 3): renamed "
                                      "before it was fsynced"),
        "the shard's fsync after its rename": (edited(move=(shard_synced, shard_renamed)),
                                               "renamed before it was fsynced"),
        "the shard's folder fsync removed": (edited({4}), "the thread's previous rename "
                                             "/r/.tmp-c/s.tmp -> /r/.tmp-c/s"),
        "config.json never fsynced": (edited({10}), "was renamed while /r/.tmp-c/config.json"),
        "the staging folder never fsynced after the index": (edited({8, 11}), "before an fsync "
                                                             "of it made its entry durable"),
        "the root not fsynced after the commit": (edited({13}), "`latest` replaced while the "
                                                  "rename /r/.tmp-c -> /r/c"),
        "latest's folder fsync removed": (edited({17}), "/r/latest.tmp -> /r/latest (line 17): "
                                          "never made durable"),
    }
    for name, (lines, expected) in defects.items():
        errors, _ = check(lines, root)
        assert any(expected in error for error in errors), (name, expected, errors)
    print(f"self-test: a good save passes, {len(defects)} planted defects each caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    log, root = sys.argv[1], os.path.realpath(sys.argv[2])
    with open(log, encoding="utf-8", errors="replace") as stream:
        errors, counts = check(stream.readlines(), root)
    summary = (f"{root}: {counts['files']} files and {counts['folders']} folders renamed, "
               f"`latest` {counts['latest']} times, {counts['fsyncs']} fsyncs")
    if counts["files"] == 0 or counts["folders"] == 0 or counts["latest"] == 0:
        errors.append(f"{summary}: the log holds no save (is the recorder preloaded?)")
    for error in errors:
        print("FAIL:", error)
    if errors:
        return 1
    print(f"{summary}: order ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
