"""meta/argument_specs.yml of both LVS roles documents exactly the variables defaults/main.yml sets, with the same
defaults, and the director's sub-option defaults are the ones the lvs_director_resolve filter fills in."""

from __future__ import annotations

import pytest
from lvs_role_files import ROLES, load_yaml

ROLE_NAMES = ("lvs_director", "lvs_realserver")


def spec(role, entry="main"):
    return load_yaml(ROLES / role / "meta" / "argument_specs.yml")["argument_specs"][entry]["options"]


def defaults(role):
    return load_yaml(ROLES / role / "defaults" / "main.yml")


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_every_default_is_documented_and_every_documented_variable_has_a_default(role):
    assert sorted(spec(role)) == sorted(defaults(role))


def _templated_collection(option, value):
    """A list or dict option whose default is a Jinja template: its documented default would be a string where the
    type says list or dict, which antsibull-docs refuses (and Galaxy renders the role's page as an error)."""
    return option.get("type") in ("list", "dict") and isinstance(value, str) and "{{" in value


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_documented_defaults_match_defaults_main(role):
    options = spec(role)
    for name, value in defaults(role).items():
        if _templated_collection(options[name], value):
            assert "default" not in options[name] and "default" in str(options[name]["description"]), name
        else:
            assert options[name].get("default") == value, name


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_no_list_or_dict_option_documents_a_string_default(role):
    for name, option in spec(role).items():
        if option.get("type") in ("list", "dict") and "default" in option:
            assert not isinstance(option["default"], str), name


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_preflight_entry_point_takes_the_same_variables(role):
    assert spec(role, "preflight") == spec(role, "main")


def test_director_sub_option_defaults_are_the_ones_the_resolve_filter_fills_in():
    from ansible_collections.hpc.balance.plugins.module_utils import _lvs_director_config as model

    options = spec("lvs_director")

    def documented(suboptions):
        return {name: option["default"] for name, option in suboptions.items() if "default" in option}

    def filled(constants, keys):
        return {key: constants[key] for key in keys if constants.get(key) not in (None,)}

    instance = options["lvs_director_vrrp_instances"]["options"]
    assert documented(instance) == filled(model.INSTANCE_DEFAULTS, instance)
    script = options["lvs_director_vrrp_scripts"]["options"]
    assert documented(script) == filled(model.VRRP_SCRIPT_DEFAULTS, script)
    server = options["lvs_director_virtual_servers"]["options"]
    assert documented(server) == filled(model.VIRTUAL_SERVER_DEFAULTS, server)
    check = server["check"]["options"]
    assert documented(check) == filled(model.CHECK_DEFAULTS, check)
    assert sorted(check["type"]["choices"]) == sorted(model.CHECK_TYPES)
    assert server["real_servers"]["options"]["weight"]["default"] == 1


def test_the_sync_group_options_are_the_keys_the_resolve_filter_reads():
    from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import SYNC_GROUP_DEFAULTS

    group = spec("lvs_director")["lvs_director_vrrp_sync_groups"]["options"]
    assert sorted(group) == sorted(["name", "instances", *SYNC_GROUP_DEFAULTS])
