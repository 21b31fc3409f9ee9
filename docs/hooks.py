"""MkDocs hook: the benchmark plots of bench/results join the site at build
time, under results/<run>/<file>.png, so that the Benchmarks page shows them
without a copy of them in git."""

from __future__ import annotations

import pathlib

from mkdocs.structure.files import File, Files

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results"


def on_files(files: Files, config) -> Files:
    for png in sorted(RESULTS.rglob("*.png")):
        if "raw" in png.relative_to(RESULTS).parts:
            continue
        uri = "results/" + png.relative_to(RESULTS).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files
