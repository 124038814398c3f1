"""Both commands are one command tree: every verb in the registry, written once, is served by
each program, from its own package."""

from __future__ import annotations

import pytest

from resource_extend.commands import program
from resource_extend.commands.protocol import Verb
from resource_extend.commands.registry import AUDITOR_COMMANDS, CORE_VERBS, HIDDEN_VERBS, load


@pytest.mark.parametrize("name", sorted(program.PROGRAMS))
def test_every_verb_is_served_by_each_program(name: str) -> None:
    with program.using(name) as serving:
        for verb in (*CORE_VERBS, *HIDDEN_VERBS):
            loaded = load(verb)
            assert isinstance(loaded, Verb), f"{name} has no {verb}"
            assert loaded.name == verb
            module = loaded.handler.__module__
            shared = module == "resource_extend.commands.meta"
            assert shared or module.startswith(serving.verbs + "."), (verb, module)
        for command in AUDITOR_COMMANDS:
            assert load(command) is not None


def test_each_program_names_its_own_kind_config_and_variables() -> None:
    gpu, storage = program.GPU, program.STORAGE
    assert (gpu.kind, gpu.config_file, gpu.env("RESIDENT")) == (
        "gpu", "gpu.yaml", "RESOURCE_GPU_RESIDENT"
    )  # fmt: skip
    assert (storage.kind, storage.config_file, storage.env("DEBUG")) == (
        "storage", "storage.yaml", "RESOURCE_STORAGE_DEBUG"
    )  # fmt: skip
    with program.using("resource-storage"):
        assert program.current() is storage
    assert program.current() is gpu
