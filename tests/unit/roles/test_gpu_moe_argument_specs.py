"""Every gpu_moe default is documented in meta/argument_specs.yml with the same value, and nothing else is."""

from __future__ import annotations

from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe"


def test_defaults_and_argument_specs_name_the_same_variables_with_the_same_defaults():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    assert {name: options[name].get("default") for name in defaults} == defaults
