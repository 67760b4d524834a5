#!/usr/bin/env python3
"""Modules depend one way, kernels <- tuner <- heuristics <- cli; fails on an edge that points up.

    python3 cmake/tests/check_module_boundaries.py [source-dir]

Includes: every quoted #include in a module's sources must resolve beside the including file or in
an include root the module may use: its own and those of the modules below it. The one header
of heuristics/include below the tuner is the auto table's layout (splitkv::auto_splits_layout).
An include that resolves nowhere in the tree (system, or generated into the build) is not judged.
CMake: a module's CMake code must not name a target of a module above it.
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROOTS = {  # module -> its include roots
    "kernels": ["kernels/include", "kernels/reference"],
    "tuner": ["tuner/include"],
    "heuristics": ["heuristics/include"],
}
BELOW = {"kernels": [], "tuner": ["kernels"], "heuristics": ["kernels", "tuner"]}
SHARED = "heuristics/include/splitkv/auto_splits_layout.hpp"  # target splitkv_auto_splits_layout
TARGETS_ABOVE = {
    "kernels": r"splitkv_(tuner|heuristics|heuristics_c|num_splits)\b",
    "tuner": r"splitkv_(heuristics|heuristics_c|num_splits)\b",
}
SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh|in)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def resolve(path, bases):
    for base in bases:
        candidate = os.path.normpath(os.path.join(ROOT, base, path))
        if os.path.isfile(candidate):
            return os.path.relpath(candidate, ROOT)
    return None


def misplaced_include(module, folder, include):
    """Where `include` resolves when that is outside what `module` may use, else None."""
    beside = resolve(include, [folder])
    if beside is not None:
        return None if beside.startswith(module + "/") else beside
    usable = ROOTS[module] + [r for below in BELOW[module] for r in ROOTS[below]]
    if resolve(include, usable) is not None:
        return None
    found = resolve(include, [r for roots in ROOTS.values() for r in roots])
    return None if found in (None, SHARED) else found


def main():
    problems = []
    for module in ROOTS:
        for folder, _, files in os.walk(os.path.join(ROOT, module)):
            folder = os.path.relpath(folder, ROOT)
            for name in sorted(files):
                rel = os.path.join(folder, name)
                if SOURCE.search(name):
                    with open(os.path.join(ROOT, rel), errors="replace") as f:
                        for number, line in enumerate(f, 1):
                            match = INCLUDE.match(line)
                            if not match or "@" in match.group(1):
                                continue  # a configure_file template's placeholder
                            where = misplaced_include(module, folder, match.group(1))
                            if where:
                                problems.append(f"{rel}:{number}: includes {match.group(1)} ({where}), "
                                                f"outside what {module} may use")
                if module in TARGETS_ABOVE and (name == "CMakeLists.txt" or name.endswith(".cmake")):
                    with open(os.path.join(ROOT, rel)) as f:
                        for number, line in enumerate(f, 1):
                            code = line.split("#", 1)[0]
                            if re.search(TARGETS_ABOVE[module], code):
                                problems.append(f"{rel}:{number}: names a target above {module}: {code.strip()}")
    for problem in problems:
        print(problem)
    print(f"module boundaries: {'ok' if not problems else str(len(problems)) + ' upward edge(s)'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
