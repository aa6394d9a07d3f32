"""One import name: the wheel installs everything beneath `tilec`, and `import tilec` is the public surface."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import tilec

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("compiler", "runtime", "server", "client", "migrations")


def _package_folders() -> set[str]:
    found = {"tilec"}
    for part in PARTS:
        for init in (ROOT / part).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            found.add("tilec." + ".".join(rel.parts))
    return found


# folders of data files beneath a package, listed as packages so that setuptools does not warn
DATA_FOLDERS = {"tilec.migrations.versions", "tilec.server.ui.static", "tilec.server.ui.static.vendor",
                "tilec.server.ui.templates"}  # fmt: skip


def test_pyproject_lists_every_package_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == _package_folders() | DATA_FOLDERS
    for name in DATA_FOLDERS:
        folder = ROOT.joinpath(*name.split(".")[1:])
        assert folder.is_dir() and not (folder / "__init__.py").exists(), name
    assert config["package-dir"] == {"tilec": "tilec", **{f"tilec.{p}": p for p in PARTS}}


def test_wheel_adds_no_other_top_level_name(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # setuptools builds inside the source tree: give it a copy
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("tilec", *PARTS):
        shutil.copytree(ROOT / part, tree / part, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    pip_wheel = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp_path),
    ]
    built = subprocess.run([*pip_wheel, str(tree)], check=True, cwd=tmp_path, capture_output=True, text=True)
    assert "absent from the `packages` configuration" not in built.stdout + built.stderr, built.stderr
    (wheel,) = tmp_path.glob("tilec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tilec"}
    # the parts, their data files and the migrations all travel inside it
    for must in (
        "tilec/cli.py",
        "tilec/compiler/pipeline.py",
        "tilec/server/app.py",
        "tilec/client/_jit.py",
        "tilec/runtime/cuda.py",
        "tilec/migrations/env.py",
        "tilec/migrations/script.py.mako",
    ):
        assert must in names
    assert any(n.startswith("tilec/migrations/versions/") and n.endswith(".py") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "tilec = tilec.cli:main" in text


def test_public_surface() -> None:
    assert tilec.__all__ == sorted(tilec.__all__)
    for name in tilec.__all__:
        assert getattr(tilec, name) is not None
    assert callable(tilec.jit) and tilec.Client.__name__ == "Client"
    assert issubclass(tilec.LaunchError, tilec.TilecError)


def test_compiler_import_stays_light() -> None:
    code = "import sys, tilec.compiler.pipeline; print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy', 'httpx', 'tilec') and m.startswith(('fastapi', 'sqlalchemy', 'httpx', 'tilec.server', 'tilec.client', 'tilec.runtime'))))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"
