"""Every Python example in the README and docs/ runs as written."""

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Names an example uses without defining them, as its text says where they come from.
GIVEN = {"trace-format.md": {"accesses": [(False, 0x1000), (True, 0x1040)]}}


def examples():
    for doc in DOCS:
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)):
            yield pytest.param(doc.name, block, id=f"{doc.name}-{i}")


@pytest.mark.parametrize(("doc", "code"), list(examples()))
def test_example_runs(doc, code, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, doc, "exec"), {"__name__": "__example__", **GIVEN.get(doc, {})})
