"""The local execution environment build (make ee-image) and audit (make ee-audit): what they change, and nothing more.

The oracles are the project's own sources: the shipped execution-environment.yml, the ``ansible`` package pinned in
requirements/controller.txt (the collections the derived definition takes instead of Galaxy's), the lab's own ssh
options (tests/lab/hpclab), bindep's parser for requirements/ee-bindep.txt and audit_report's documented verdicts.
"""
from __future__ import annotations

import json
import pathlib
import shlex
import sys
import sysconfig

import pytest
import yaml
from bindep.depends import Depends

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "ee"))
sys.path.insert(0, str(ROOT / "tests" / "lab"))

import compare_verdicts  # noqa: E402
import container_inventory  # noqa: E402
import local_definition  # noqa: E402
from hpclab.netns_inventory import ssh_common_args  # noqa: E402
from hpclab.uml_inventory import GUEST_SSH_KEEPALIVE  # noqa: E402

VENV_COLLECTIONS = pathlib.Path(sysconfig.get_paths()["purelib"]) / "ansible_collections"


def _shipped() -> dict:
    return yaml.safe_load((ROOT / "execution-environment.yml").read_text())


def _options(args: str) -> list[str]:
    """The values of an ssh argument string's -o options, in order."""
    words = shlex.split(args)
    assert words[::2] == ["-o"] * (len(words) // 2)
    return words[1::2]


def test_the_container_reaches_the_lab_directly_with_every_other_ssh_option_kept(tmp_path):
    lab_args = f"{ssh_common_args('hb', tmp_path)} {GUEST_SSH_KEEPALIVE}"
    expected = [f"ControlPath={container_inventory.CONTROL_PATH}" if o.startswith("ControlPath") else o
                for o in _options(lab_args) if not o.startswith("ProxyCommand")]
    assert len(expected) == len(_options(lab_args)) - 1
    assert _options(container_inventory.direct_ssh_args(lab_args)) == expected


def test_the_inventory_rewrite_touches_ssh_options_only(tmp_path):
    source = {"all": {"children": {"lvs_directors": {"hosts": {"udir1": {
        "ansible_host": "198.18.0.151", "ansible_ssh_private_key_file": str(tmp_path / "ssh" / "id_ed25519"),
        "ansible_ssh_common_args": ssh_common_args("hb", tmp_path)}}}}}}
    host = container_inventory.rewrite(source)["all"]["children"]["lvs_directors"]["hosts"]["udir1"]
    assert "ProxyCommand" not in host["ansible_ssh_common_args"]
    assert {k: v for k, v in host.items() if k != "ansible_ssh_common_args"} == {
        "ansible_host": "198.18.0.151", "ansible_ssh_private_key_file": str(tmp_path / "ssh" / "id_ed25519")}


def _collections_at_the_shipped_versions(folder: pathlib.Path) -> pathlib.Path:
    """An ansible_collections folder holding each collection of the shipped requirements at its pinned version."""
    for item in yaml.safe_load((ROOT / _shipped()["dependencies"]["galaxy"]).read_text())["collections"]:
        manifest = folder.joinpath(*item["name"].split("."), "MANIFEST.json")
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({"collection_info": {"version": str(item["version"])}}))
    return folder


def test_the_derived_definition_differs_from_the_shipped_one_in_the_stated_places_only(tmp_path):
    shipped = _shipped()
    collections = _collections_at_the_shipped_versions(tmp_path / "ansible_collections")
    local, requirements = local_definition.derive(shipped, ROOT, "localhost/base:x", collections, tmp_path)
    assert local["images"]["base_image"]["name"] == "localhost/base:x"
    assert local["options"] == {"package_manager_path": "/usr/bin/apt-get", "skip_pip_install": True}
    assert local["dependencies"]["ansible_core"] == shipped["dependencies"]["ansible_core"]
    assert local["dependencies"]["ansible_runner"] == shipped["dependencies"]["ansible_runner"]
    assert local["additional_build_steps"] == shipped["additional_build_steps"]
    wanted = yaml.safe_load((ROOT / shipped["dependencies"]["galaxy"]).read_text())["collections"]
    assert [item["name"] for item in requirements["collections"]] == [
        f"/build/collection-sources/{item['name'].replace('.', '/')}" for item in wanted]
    # The tarball entry still names galaxy.yml's tarball by glob, now relative to the derived file's folder.
    tarball = local["additional_build_files"][0]
    assert (tmp_path / tarball["src"]).resolve() == (ROOT / shipped["additional_build_files"][0]["src"]).resolve()


@pytest.mark.skipif(not (VENV_COLLECTIONS / "ansible" / "posix").is_dir(),
                    reason="the ansible package (requirements/controller.txt) is not installed here")
def test_the_pinned_ansible_package_holds_the_shipped_collection_versions(tmp_path):
    """make ee-image takes the collections from .venv's ansible package: it must hold what the image ships."""
    local_definition.derive(_shipped(), ROOT, "b", VENV_COLLECTIONS, tmp_path)


def test_a_collection_at_another_version_than_the_shipped_requirements_stops_the_derivation(tmp_path):
    manifest = tmp_path / "ansible" / "posix" / "MANIFEST.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"collection_info": {"version": "0.0.1"}}))
    with pytest.raises(ValueError, match="ansible.posix: requirements say 2.1.0, .* has 0.0.1"):
        local_definition.derive(_shipped(), ROOT, "b", tmp_path, tmp_path / "out")


@pytest.mark.parametrize(("profile", "ssh_client"), [
    (["platform:rpm", "platform:centos"], "openssh-clients"),
    (["platform:dpkg", "platform:debian"], "openssh-client"),
])
def test_bindep_names_an_ssh_client_and_iperf3_on_rpm_and_dpkg_bases(profile, ssh_client):
    rules = Depends((ROOT / "requirements" / "ee-bindep.txt").read_text()).active_rules(profile)
    assert sorted(rule[0] for rule in rules) == sorted([ssh_client, "iperf3"])


def test_a_differing_verdict_is_named_and_metrics_are_only_shown():
    # audit_report's documented verdict values (plugins/modules/audit_report.py RETURN: verdicts).
    outside = {"verdicts": {"network": "balanced", "host_link": "balanced", "compute": "balanced"},
               "metrics": {"host_link": {"name": "share of ceiling", "value": 96.0, "unit": "%"}}}
    inside = {"verdicts": {"network": "balanced", "host_link": "balanced", "compute": "balanced"},
              "metrics": {"host_link": {"name": "share of ceiling", "value": 91.5, "unit": "%"}}}
    rows, differ = compare_verdicts.compare(outside, inside)
    assert differ == []
    assert rows[1] == ("host_link", "balanced", "balanced", "share of ceiling 96 %", "share of ceiling 91.5 %")
    rows, differ = compare_verdicts.compare(outside, {**inside, "verdicts": {**inside["verdicts"], "network": "error"}})
    assert differ == ["network"]
    assert rows[0] == ("network", "balanced", "error", "", "")
