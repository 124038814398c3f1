"""Both commands are one command tree: every verb in the registry, written once, is served by
each program, from its own package."""

from __future__ import annotations

import pytest

from resource_extend.commands.programs import programs
from resource_extend.commands.protocol import Verb
from resource_extend.commands.registry import (
    AUDITOR_COMMANDS,
    COMMANDS,
    CORE_VERBS,
    HIDDEN_VERBS,
    load,
    operator_commands,
    people_commands,
)

PROGRAMS = programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_verb_is_served_by_each_program(name: str) -> None:
    serving = PROGRAMS[name]
    for verb in (*CORE_VERBS, *HIDDEN_VERBS):
        loaded = load(serving, verb)
        assert isinstance(loaded, Verb), f"{name} has no {verb}"
        assert loaded.name == verb
        module = loaded.handler.__module__
        shared = module == "resource_extend.commands.meta"
        assert shared or module.startswith(f"{serving.verbs}."), module
    for command in people_commands(serving):
        assert load(serving, command) is not None
    owned = (plugin.commands for plugin in PROGRAMS.values())
    others = set().union(*owned) - set(people_commands(serving))
    for command in others:  # another program's own (resource-storage has no detect)
        assert load(serving, command) is None, (name, command)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_program_and_its_ledger_kind_agree_on_names(name: str) -> None:
    """The plugin and its fold (what the ledger is handed) each name the kind and the
    command; they must say the same."""
    serving = PROGRAMS[name]
    kind = serving.parts.fold
    assert (kind.name, kind.program) == (serving.kind, serving.name)


def test_each_program_names_its_own_kind_config_and_variables() -> None:
    gpu, storage = PROGRAMS["resource-gpu"], PROGRAMS["resource-storage"]
    assert (gpu.kind, gpu.config_file, gpu.env("RESIDENT")) == (
        "gpu", "gpu.yaml", "RESOURCE_GPU_RESIDENT"
    )  # fmt: skip
    assert (storage.kind, storage.config_file, storage.env("DEBUG")) == (
        "storage", "storage.yaml", "RESOURCE_STORAGE_DEBUG"
    )  # fmt: skip


def _help(name: str, *command: str) -> None:
    from resource_extend.commands.cli import main

    with pytest.raises(SystemExit) as exited:
        main(PROGRAMS[name], [*command, "--help"])
    assert exited.value.code == 0


@pytest.mark.parametrize(
    "order", [("resource-gpu", "resource-storage"), ("resource-storage", "resource-gpu")]
)
def test_each_programs_help_names_itself_and_its_own_config(
    order: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The shared commands' help is written once with {prog} and {config}: each program shows
    its own, whichever asked first (the commands are not rewritten in place)."""
    for name in order:
        serving = PROGRAMS[name]
        (other,) = (plugin for plugin in PROGRAMS.values() if plugin is not serving)
        for command in ((), *((c,) for c in (*CORE_VERBS, *people_commands(serving)))):
            _help(name, *command)
            text = capsys.readouterr().out
            assert "{prog}" not in text and "{config}" not in text, (name, command, text)
            assert other.config_file not in text, (name, command, text)
            examples = [line.split()[:2] for line in text.splitlines()]  # "PROG VERB ..."
            assert not any(
                words[0] == other.name and (words[1] in COMMANDS or words[1].startswith("-"))
                for words in examples
                if len(words) == 2
            ), (name, command, text)
        _help(name, "helper")
        assert f"{name} helper --all --stop" in capsys.readouterr().out
        _help(name)
        assert f"else ./{serving.config_file}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_manual_lists_every_command_in_its_section(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The list is made from the registry and the commands themselves, so a command added
    there is listed, with the first sentence of its own help."""
    _help(name)
    text = capsys.readouterr().out
    sections = {
        "Core's verbs": list(CORE_VERBS),
        "Auditors": list(AUDITOR_COMMANDS),
        "Operators": list(operator_commands(PROGRAMS[name])),
    }
    lines = text.splitlines()
    for title, names in sections.items():
        (start,) = (i for i, line in enumerate(lines) if line.startswith(title))
        listed = []
        for line in lines[start + 1 :]:
            if not line.strip():
                break
            if not line.startswith("   "):  # a command's line, not its help wrapped below
                listed.append(line.split()[0])
        assert listed == names, title
    assert "Show the resident helper that serves core's calls" in text
