"""The one boolean reader: Ansible's strict reading, None as the default, and an error naming variable and value."""

from __future__ import annotations

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._booleans import BooleanInputError, read_boolean


@pytest.mark.parametrize("value", ["false", "False", "no", "NO", "0", "off", "n", "f", " false ", 0, 0.0, False])
def test_the_false_spellings_of_extra_vars_and_ini_inventories_read_as_false(value):
    assert read_boolean(value, "x") is False


@pytest.mark.parametrize("value", ["true", "True", "yes", "1", "on", "y", "t", 1, 1.0, True])
def test_the_true_spellings_read_as_true(value):
    assert read_boolean(value, "x") is True


@pytest.mark.parametrize(("default", "expected"), [(False, False), (True, True)])
def test_an_unset_value_reads_as_the_default(default, expected):
    assert read_boolean(None, "x", default=default) is expected


@pytest.mark.parametrize(("value", "shown"), [("maybe", "'maybe'"), ("", "''"), (2, "2"), ([True], "[True]")])
def test_a_value_that_is_no_boolean_is_refused_naming_the_variable_and_the_value(value, shown):
    with pytest.raises(BooleanInputError) as raised:
        read_boolean(value, "lvs_director_vrrp_instances[VI_1].nopreempt on dir1")
    assert str(raised.value) == (
        f"lvs_director_vrrp_instances[VI_1].nopreempt on dir1 is {shown}, which is not a boolean: "
        "set it to true or false (yes/no, on/off, 1/0 read the same)"
    )


def test_the_error_is_a_value_error_so_callers_may_catch_either():
    assert issubclass(BooleanInputError, ValueError)
