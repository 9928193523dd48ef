"""scripts/figures.py knows every figure of docs/img: each is either drawn by it from steer's
simulations or listed as a host's measurement; and docs/sweeps.md quotes the numbers the model
gives now. Nothing here draws the figures (a sweep and seed 001's curves: run the script after a
change to the model)."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "figures.py"
spec = importlib.util.spec_from_file_location("figures", SCRIPT)
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)


def test_every_image_of_the_docs_is_drawn_by_the_script_or_measured_on_a_host():
    images = {path.name for path in (ROOT / "docs" / "img").iterdir()}
    assert set(figures.FIGURES).isdisjoint(figures.HOST_MEASURED)
    assert sorted(images) == sorted([*figures.FIGURES, *figures.HOST_MEASURED])


def test_every_image_the_docs_show_is_in_docs_img():
    docs = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    shown = {name for doc in docs for name in re.findall(r"!\[[^]]*\]\((?:docs/)?img/([^)]+)\)", doc.read_text())}
    assert shown == set(figures.FIGURES) | set(figures.HOST_MEASURED)


def test_the_script_says_how_each_image_is_made():
    for name in [*figures.FIGURES, *figures.HOST_MEASURED]:
        assert name in figures.__doc__


def test_the_table_of_docs_sweeps_md_is_what_the_model_gives_now():
    """The table is seven runs of 10 ms (a few seconds): a change to the model that moves it must
    refresh the docs with the script."""
    assert figures.memory_table() in (ROOT / "docs" / "sweeps.md").read_text()


def test_the_steering_limit_docs_sweeps_md_quotes_is_the_presets():
    assert (
        figures.steering_limit()
        == "steering limit: 6.56 GB/s per CCX = 49.2 Gb/s of 1500 B packets (25 line writes each)"
    )
    text = " ".join((ROOT / "docs" / "sweeps.md").read_text().split())
    assert "is 6.56 GB/s for the 9655's 8 cores at 4.1 GHz. A packet is 25 line writes" in text
    assert "so that rate carries 49.2 Gb/s of packets" in text


def test_the_table_of_docs_storage_md_is_what_the_model_gives_now():
    """Twelve runs of nvme-read (about a second): a change that moves them must refresh the docs."""
    assert figures.storage_table() in (ROOT / "docs" / "storage.md").read_text()
