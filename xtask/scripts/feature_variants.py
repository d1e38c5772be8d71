#!/usr/bin/env python3
"""Which dependencies a workspace member, built alone, resolves with other
features than the workspace build does (ADR 0085).

CI checks every member alone (`cargo clippy -p X --all-targets`); each
package listed here is checked a second time for that member, with
everything above it. A never-published member should list nothing: add the
package, with the workspace's features, to testing/workspace-hack's
manifest. A published crate lists what its users' builds resolve.

Usage: python3 xtask/scripts/feature_variants.py [MEMBER ...]
(no argument: every member). Needs cargo; reads the lock file only.
"""

import collections
import json
import subprocess
import sys


def features(args):
    """{package id: set of feature lists} of `cargo tree ARGS`."""
    out = subprocess.run(
        ["cargo", "tree", "-e", "normal,build,dev", "--prefix", "none",
         "-f", "{p}|{f}"] + args,
        capture_output=True, text=True, check=True,
    ).stdout
    found = collections.defaultdict(set)
    for line in out.splitlines():
        line = line.replace(" (*)", "")
        if "|" not in line:
            continue
        package, feats = line.rsplit("|", 1)
        package = package.replace(" (proc-macro)", "").split(" (")[0]
        found[package].add(feats)
    return found


def main():
    members = sys.argv[1:]
    if not members:
        meta = json.loads(subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            capture_output=True, text=True, check=True).stdout)
        members = sorted(p["name"] for p in meta["packages"])
    workspace = features(["--workspace"])
    for member in members:
        alone = features(["-p", member])
        differ = sorted(p for p, f in alone.items() if f != workspace.get(p))
        print(f"{member}: {len(differ)} packages resolved otherwise than in the workspace")
        for p in differ:
            print(f"    {p}: alone {sorted(alone[p])}, workspace {sorted(workspace.get(p, []))}")


if __name__ == "__main__":
    main()
