"""Checks that scripts/setup.sh installs every Debian package whose Python
modules the repository imports (tests, benchmarks, examples, scripts).

A fresh machine has only what setup installs: a module that happens to be
on the developer's machine must not make a test pass there and fail in CI.
Run with the interpreter magpy embeds: /usr/bin/python3 tests/check_setup.py
"""
import ast
import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ("tests", "bench", "examples", "scripts", "python")


def imported_modules():
    """Top-level names of every absolute import, with the files importing them."""
    found = {}
    for top in SCANNED:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        names = [node.module]
                    else:
                        continue
                    for n in names:
                        found.setdefault(n.split(".")[0], set()).add(os.path.relpath(path, ROOT))
    return found


def setup_packages():
    text = open(os.path.join(ROOT, "scripts", "setup.sh"), encoding="utf-8").read()
    block = re.search(r"packages=\((.*?)\)", text, re.S)
    if not block:
        sys.exit("check_setup: scripts/setup.sh has no packages=( ... ) list")
    return set(block.group(1).split())


def local_modules():
    """Names the repository's own files and folders give to imports."""
    names = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
        names.update(os.path.splitext(f)[0] for f in files if f.endswith(".py"))
        names.update(dirs)
    return names


def debian_package(module, local):
    """The Debian package that installed a module, or None for the standard
    library and the repository's own modules."""
    if module in sys.stdlib_module_names or module in local:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "(not installed on this machine)"
    origin = spec.origin
    if not origin or "dist-packages" not in origin:
        return None
    out = subprocess.run(["dpkg", "-S", origin], capture_output=True, text=True)
    if out.returncode != 0:
        return "(not from a Debian package: " + origin + ")"
    return out.stdout.split(":")[0].strip()


def main():
    listed = setup_packages()
    local = local_modules()
    missing = []
    checked = 0
    for module, users in sorted(imported_modules().items()):
        pkg = debian_package(module, local)
        if pkg is None:
            continue
        checked += 1
        if pkg not in listed:
            missing.append(f"{module} (package {pkg}), imported by {', '.join(sorted(users))}")
    if missing:
        print("scripts/setup.sh does not install what the repository imports:")
        for m in missing:
            print("  " + m)
        print("add each package to the packages list in scripts/setup.sh")
        return 1
    print(f"check_setup: {checked} third-party modules imported, all installed by scripts/setup.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
