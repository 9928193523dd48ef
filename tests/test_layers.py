"""scripts/layers.py: which imports it reads, which it refuses, and its exit codes."""

import ast
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "scripts" / "layers.py"
spec = importlib.util.spec_from_file_location("layers", SCRIPT)
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)


def crate(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_downward_import_passes(tmp_path):
    src = crate(tmp_path, {"units.rs": "", "engine.rs": "use crate::units::Time;\n"})
    lines, code = layers.check(src)
    assert code == 0
    assert "upward imports: 0 (0 pairs of modules)" in lines and "circles: 0" in lines


def test_an_upward_import_fails_naming_file_line_and_layer(tmp_path):
    src = crate(tmp_path, {"scenario.rs": "", "engine.rs": "// the engine\nuse crate::scenario::Scenario;\n"})
    lines, code = layers.check(src)
    assert code == 1
    assert "  engine:2 -> scenario (scenarios)" in lines


def test_a_grouped_import_names_each_module(tmp_path):
    src = crate(
        tmp_path,
        {
            "engine.rs": "",
            "devices/mod.rs": "",
            "devices/ring.rs": "",
            "cpu.rs": "",
            "hierarchy.rs": "use crate::{engine::Signal, devices::{ring::RxRing, DeviceSpec}, cpu};\n",
        },
    )
    found = layers.imports(src)
    assert sorted(m for _, m in found["hierarchy"]) == ["cpu", "devices", "devices::ring", "engine"]


def test_super_is_the_parent_module(tmp_path):
    src = crate(tmp_path, {"devices/mod.rs": "", "devices/nic.rs": "use super::DeviceSpec;\n", "cpu.rs": ""})
    assert layers.imports(src)["devices::nic"] == [(1, "devices")]


def test_a_path_inside_an_expression_counts(tmp_path):
    src = crate(tmp_path, {"host.rs": "", "platform.rs": "fn f() { crate::host::read() }\n"})
    lines, code = layers.check(src)
    assert code == 1 and "  platform:1 -> host (host)" in lines


def test_comments_and_the_test_module_are_not_imports(tmp_path):
    text = "// see crate::host::read\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::host::read;\n}\n"
    src = crate(tmp_path, {"host.rs": "", "platform.rs": text})
    assert layers.imports(src)["platform"] == []


def test_a_circle_within_a_layer_fails(tmp_path):
    src = crate(tmp_path, {"memory.rs": "use crate::platform::X;\n", "platform.rs": "use crate::memory::Y;\n"})
    lines, code = layers.check(src)
    assert code == 1
    assert "  memory <-> platform" in lines


def test_a_module_no_layer_claims_is_exit_2(tmp_path):
    src = crate(tmp_path, {"gadget.rs": ""})
    lines, code = layers.check(src)
    assert code == 2
    assert lines == ["layers: no layer claims gadget (scripts/layers.py, LAYERS)"]


ROOT = Path(__file__).parent.parent


def test_the_trace_replayer_has_no_circle():
    found = layers.imports(ROOT / "crates/steer-trace/src")
    graph = {module: {named for _, named in used} for module, used in found.items()}
    assert layers.circles(graph) == []


def python_imports(package: Path) -> dict[str, set[str]]:
    """Per module of the package, the package's modules it imports (at the top or in a function)."""
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        named = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "steer":
                named |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("steer."):
                named.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                named |= {a.name.split(".")[1] for a in node.names if a.name.startswith("steer.")}
        graph[path.stem] = (named & modules) - {path.stem, "__init__"}
    return graph


def test_the_python_package_has_no_circle():
    graph = python_imports(ROOT / "python/steer")
    assert graph["sweep"] >= {"store", "tomlfile"}  # the reading sees imports
    assert layers.circles(graph) == []


def test_the_simulator_crate_has_no_upward_import_and_no_circle():
    lines, code = layers.check(ROOT / "crates/steer-sim/src")
    assert code == 0, "\n".join(lines)
