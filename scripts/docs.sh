#!/usr/bin/env bash
# Builds the documentation site into build/docs (git-ignored), with every
# warning an error (mkdocs.yml: strict). Uses the project's .venv (or
# JAXMG_VENV), making one if there is none, and installs the site's tools
# into it from PyPI (docs/requirements.txt; a no-op when they are there).
# The API reference is read from python/jaxmg's sources (mkdocstrings,
# without importing jaxmg), so the site builds without building jaxmg.
# The docs' Python examples are run by tests/python/test_docs_examples.py.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${JAXMG_VENV:-$root/.venv}"
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/docs/requirements.txt"
cd "$root"
# Material for MkDocs prints a notice about MkDocs 2.0 on every build.
export NO_MKDOCS_2_WARNING=1
"$venv/bin/python" -m mkdocs build --strict --clean --config-file "$root/mkdocs.yml" "$@"
echo "docs: built into $root/build/docs (open build/docs/index.html)"
