"""Render the LVS roles' templates the way the template module does (trim_blocks), without a host."""

from __future__ import annotations

import jinja2
import pytest
from lvs_role_files import ROLES


@pytest.fixture
def render():
    """render(role, template, **variables) -> the text the template module would write."""

    # Imported here: the collection loader is in place only once pytest-ansible has configured the session.
    from ansible.plugins.filter.core import FilterModule as CoreFilters

    from ansible_collections.hpc.balance.plugins.filter.lvs_sysctl import FilterModule as SysctlFilters

    def _render(role, template, **variables):
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(ROLES / role / "templates")),
            trim_blocks=True,
            keep_trailing_newline=True,
            undefined=jinja2.StrictUndefined,
        )
        # Ansible's own bool filter, which the templates use for booleans given as text ("false" from -e).
        environment.filters["bool"] = CoreFilters().filters()["bool"]
        environment.filters.update(
            {f"hpc.balance.{name}": function for name, function in SysctlFilters().filters().items()}
        )
        return environment.get_template(template).render(ansible_managed="Ansible managed", **variables)

    return _render
