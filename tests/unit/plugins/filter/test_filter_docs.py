"""Every filter the collection exposes has documentation that ansible-doc renders.

Galaxy's importer (galaxy-importer) runs ``ansible-doc --type filter`` over every filter; one filter without
documentation makes it exit 1, and the importer then drops the documentation of all of them. So the list of filters
is read from the FilterModule classes themselves, not written down here, and ansible-doc is the real one.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

FILTER_DIR = Path(__file__).resolve().parents[4] / "plugins" / "filter"


def exposed_filters() -> list[str]:
    names = []
    for path in sorted(FILTER_DIR.glob("*.py")):
        module = importlib.import_module(f"ansible_collections.hpc.balance.plugins.filter.{path.stem}")
        names.extend(module.FilterModule().filters())
    return sorted(names)


def test_the_collection_exposes_filters_to_check():
    assert "lvs_director_script_lookups" in exposed_filters()


def test_ansible_doc_renders_every_exposed_filter_under_its_own_name():
    names = [f"hpc.balance.{name}" for name in exposed_filters()]
    ansible_doc = Path(sys.executable).parent / "ansible-doc"
    result = subprocess.run([str(ansible_doc), "--type", "filter", "--json", *names], capture_output=True, text=True,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)
    assert result.returncode == 0, result.stderr
    docs = json.loads(result.stdout)
    assert sorted(docs) == names
    for name, entry in docs.items():
        assert entry["doc"]["name"] == name.rsplit(".", 1)[1], name
        assert entry["doc"]["short_description"], name
