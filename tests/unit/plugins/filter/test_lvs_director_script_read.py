"""The preflight reads every program and folder keepalived would run or walk in one step; that read, run here for
real (/bin/sh and GNU stat, as on a Debian director), must give the facts os.stat and os.access give.

keepalived's check_security (2.2.7, lib/notify.c) judges what a link points to, so the read follows links; a path
that does not exist is missing, not unsafe.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_script_stat_command,
    lvs_director_script_stats,
)


def read(paths):
    done = subprocess.run(lvs_director_script_stat_command(paths), capture_output=True, text=True, check=False)
    return {"rc": done.returncode, "stdout": done.stdout.rstrip("\n")}


def expected(path):
    """What os.stat (following links) and os.access say of ``path``."""
    if not os.path.exists(path):
        return {"exists": False, "executable": False, "uid": None, "gid": None, "mode": None}
    facts = os.stat(path)
    return {"exists": True, "executable": stat.S_ISREG(facts.st_mode) and os.access(path, os.X_OK),
            "uid": facts.st_uid, "gid": facts.st_gid, "mode": f"{stat.S_IMODE(facts.st_mode):04o}"}


@pytest.mark.skipif(os.geteuid() != 0, reason="sets owners other than the test's user")
def test_the_one_read_gives_what_stat_and_access_give(tmp_path):
    folder = tmp_path / "scripts dir"  # a blank in a folder's name is read too
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o1777)
    program = folder / "chk"
    program.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(program, 0o775)
    os.chown(program, 0, 100)
    plain = tmp_path / "not-executable"
    plain.write_text("x\n")
    os.chmod(plain, 0o644)
    os.chown(plain, 1000, 1000)
    link = tmp_path / "link-to-chk"
    link.symlink_to(program)
    paths = [str(program), str(plain), str(link), str(tmp_path / "gone"), str(folder), "/"]
    facts = lvs_director_script_stats(read(paths), paths)
    assert {path: {key: value for key, value in fact.items() if key != "folders"} for path, fact in facts.items()} \
        == {path: expected(path) for path in paths}
    # The link counts as what it points to (0775, gid 100), not as the link's own 0777.
    assert facts[str(link)]["mode"] == "0775" and facts[str(link)]["gid"] == 100
    assert facts[str(folder)]["mode"] == "1777" and facts[str(folder)]["executable"] is False
    assert facts[str(tmp_path / "gone")]["exists"] is False
    # "/" is a folder above every program, listed under each one's folders.
    assert facts[str(program)]["folders"][0]["path"] == "/"


def test_no_path_reads_nothing():
    assert lvs_director_script_stats(None, []) == {}
    assert lvs_director_script_stats(read([]), []) == {}
