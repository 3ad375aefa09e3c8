"""The generic registry (closest-name hints, refused duplicates, lazy entries) and the registries on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shoparena.errors import ConfigError, NotFoundError
from shoparena.registry import Registry


def colours() -> Registry[int]:
    reg: Registry[int] = Registry("colour", usage="or a hex code")
    reg.add("red", 1)
    reg.register("green")(2)
    reg.alias("verdant", "green")
    return reg


def test_lookup_names_and_aliases() -> None:
    reg = colours()
    assert reg.get("red") == 1 and reg["green"] == 2 and reg.get("verdant") == 2
    assert reg.names() == list(reg) == ["green", "red"]  # aliases are not listed
    assert "verdant" in reg and "blue" not in reg and 3 not in reg
    assert len(reg) == 2


def test_unknown_name_raises_the_registry_error_with_the_closest_name() -> None:
    with pytest.raises(NotFoundError) as info:
        colours().get("gren")
    err = info.value
    assert err.message == "unknown colour 'gren'"
    assert err.hint == "did you mean green? choose one of: green, red; or a hex code"
    with pytest.raises(NotFoundError) as far:
        colours().get("zzzzzz")
    assert "did you mean" not in str(far.value) and "choose one of: green, red" in str(far.value)
    typed: Registry[int] = Registry("knob", error=ConfigError)
    with pytest.raises(ConfigError, match="unknown knob 'x'") as none:
        typed.get("x")
    assert none.value.exit_code == 2 and "(none)" in str(none.value)


def test_unknown_can_quote_the_whole_spec_and_offer_more_choices() -> None:
    err = colours().unknown("redd", also=["blue"], shown="redd:light")
    assert err.message == "unknown colour 'redd:light'"
    assert "did you mean red?" in str(err) and "blue" in str(err)


def test_duplicate_and_empty_names_are_refused() -> None:
    reg = colours()
    for register in (lambda: reg.add("red", 9), lambda: reg.register("green")(9),
                     lambda: reg.lazy("red", "json:dumps"), lambda: reg.alias("red", "green"),
                     lambda: reg.add("verdant", 9)):
        with pytest.raises(ConfigError, match="already registered"):
            register()
    with pytest.raises(ConfigError, match="non-empty name"):
        reg.add(" ", 3)
    with pytest.raises(NotFoundError):
        reg.alias("scarlet", "crimson")  # an alias of nothing
    assert reg.get("red") == 1 and reg.names() == ["green", "red"]  # the refused attempts changed nothing


def test_lazy_entry_is_imported_on_first_use_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shoparena_test_lazy_plugin.py").write_text("IMPORTS = []\nIMPORTS.append(1)\n"
                                                            "def factory():\n    return 'built'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shoparena_test_lazy_plugin", raising=False)
    reg: Registry[object] = Registry("plugin")
    reg.lazy("late", "shoparena_test_lazy_plugin:factory")
    assert "late" in reg and reg.names() == ["late"]
    assert "shoparena_test_lazy_plugin" not in sys.modules
    factory = reg.get("late")
    module = sys.modules["shoparena_test_lazy_plugin"]
    assert factory() == "built" and reg.get("late") is factory and module.IMPORTS == [1]


def test_lazy_entry_with_a_missing_dependency_gives_the_install_hint(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shoparena_test_heavy_plugin.py").write_text("import shoparena_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[object] = Registry("backend")
    reg.lazy("heavy", "shoparena_test_heavy_plugin:factory", install="pip install 'shoparena[heavy]'")
    with pytest.raises(ConfigError, match="needs 'shoparena_no_such_dependency'") as info:
        reg.get("heavy")
    assert info.value.hint == "pip install 'shoparena[heavy]'"
    reg.lazy("typo", "json:no_such_attribute")
    with pytest.raises(ConfigError, match="no 'no_such_attribute'"):
        reg.get("typo")
    with pytest.raises(ConfigError, match=r"package\.module:attribute"):
        reg.lazy("bad", "json.dumps")


def test_model_backends_are_lazy_until_used() -> None:
    """Listing the schemes imports no backend module (so neither transformers nor torch)."""
    code = ("import sys\nfrom shoparena.llm.types import backend_schemes, get_backend\n"
            "assert backend_schemes() == ['hf', 'llamacpp', 'openai', 'policy'], backend_schemes()\n"
            "heavy = ['shoparena.llm.hf_backend', 'shoparena.llm.llamacpp_backend', 'shoparena.llm.openai_backend',"
            " 'shoparena.llm.policies', 'torch', 'llama_cpp']\n"
            "assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]\n"
            "get_backend('policy:expert')\n"
            "assert 'shoparena.llm.policies' in sys.modules\n"
            "assert 'shoparena.llm.hf_backend' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_every_plugin_lookup_hints_the_closest_name() -> None:
    from shoparena.agents.loading import agent_path
    from shoparena.env.tools import TOOLS, get_toolset
    from shoparena.llm.types import get_backend
    from shoparena.scoring.similarity import get_similarity
    from shoparena.validator.judge import get_judge
    from shoparena.validator.sandbox import get_sandbox

    cases = [(lambda: get_backend("opnai:http://x/v1/m"), ConfigError, "did you mean openai?"),
             (lambda: get_backend("no-colon"), ConfigError, "unknown model backend 'no-colon'"),
             (lambda: get_similarity("lexcal"), ConfigError, "did you mean lexical?"),
             (lambda: get_judge("rubrik"), ConfigError, "did you mean rubric?"),
             (lambda: get_sandbox("dockr"), NotFoundError, "did you mean docker?"),
             (lambda: agent_path("pipelin"), NotFoundError, "did you mean pipeline?"),
             (lambda: TOOLS.get("find_prodct"), ConfigError, "did you mean find_product?")]
    for call, error, text in cases:
        with pytest.raises(error) as info:
            call()
        assert text in str(info.value)
    get_toolset("oro7")  # registers the built-in tools
    assert TOOLS.get("find_product").name == "find_product"
    assert get_sandbox("bwrap", forbidden=[]).name == "bubblewrap"  # the alias


def test_loader_runs_once_before_the_first_lookup() -> None:
    calls: list[int] = []

    def load() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("flaky import")
        reg.add("late", 7)
        assert reg.names() == ["early", "late"]  # a lookup from inside the loader does not run it again

    reg: Registry[int] = Registry("tool", loader=load)
    reg.add("early", 1)
    assert calls == []  # registering does not load
    with pytest.raises(RuntimeError):
        reg.get("late")
    assert reg.get("late") == 7 and reg.names() == ["early", "late"] and calls == [1, 1]
