"""file_set on real files in a temporary folder: only differing files are written, validate runs on the staged copy
and a failed check writes nothing at all, check mode writes nothing and predicts the same changes, diff per file."""

from __future__ import annotations

import json
import os
import stat

from ansible_collections.hpc.balance.plugins.modules import file_set


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def spec(path, content, **extra):
    return {"path": str(path), "content": content, **extra}


def test_writes_new_files_and_reports_each_path(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "a.conf", "a = 1\n", mode="0644"),
                                                     spec(tmp_path / "b.sh", "#!/bin/sh\n", mode="0755")]})
    assert not failed, result
    assert result["changed"] is True
    assert result["changed_paths"] == [str(tmp_path / "a.conf"), str(tmp_path / "b.sh")]
    assert (tmp_path / "a.conf").read_text() == "a = 1\n" and mode_of(tmp_path / "a.conf") == 0o644
    assert mode_of(tmp_path / "b.sh") == 0o755
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".file_set.")]  # no staged file left


def test_a_second_run_with_the_same_content_changes_nothing(run_module, tmp_path):
    files = [spec(tmp_path / "a.conf", "a = 1\n", mode="0644")]
    run_module(file_set, {"files": files})
    before = os.stat(tmp_path / "a.conf").st_mtime_ns
    failed, result = run_module(file_set, {"files": files})
    assert not failed and result["changed"] is False and result["changed_paths"] == []
    assert os.stat(tmp_path / "a.conf").st_mtime_ns == before


def test_only_the_differing_file_is_written_and_a_mode_change_alone_counts(run_module, tmp_path):
    (tmp_path / "same").write_text("x\n")
    (tmp_path / "same").chmod(0o644)
    (tmp_path / "other").write_text("old\n")
    (tmp_path / "loose").write_text("y\n")
    (tmp_path / "loose").chmod(0o666)
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "same", "x\n", mode="0644"),
                                                     spec(tmp_path / "other", "new\n"),
                                                     spec(tmp_path / "loose", "y\n", mode="0640")],
                                           "_ansible_diff": True})
    assert not failed, result
    assert result["changed_paths"] == [str(tmp_path / "other"), str(tmp_path / "loose")]
    assert [entry["content_changed"] for entry in result["files"]] == [False, True, False]
    assert mode_of(tmp_path / "loose") == 0o640
    assert (tmp_path / "other").read_text() == "new\n"
    by_header = {entry["after_header"]: entry for entry in result["diff"]}
    assert (by_header[str(tmp_path / "other")]["before"], by_header[str(tmp_path / "other")]["after"]) == (
        "old\n", "new\n")
    assert "0640" in by_header[str(tmp_path / "loose")]["after"]


def test_check_mode_predicts_the_change_and_writes_nothing(run_module, tmp_path):
    (tmp_path / "old").write_text("old\n")
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "old", "new\n"), spec(tmp_path / "new", "n\n")],
                                           "_ansible_check_mode": True, "_ansible_diff": True})
    assert not failed, result
    assert result["changed_paths"] == [str(tmp_path / "old"), str(tmp_path / "new")]
    assert (tmp_path / "old").read_text() == "old\n" and not (tmp_path / "new").exists()
    assert [entry["before_header"] for entry in result["diff"]] == [str(tmp_path / "old"),
                                                                    f"{tmp_path / 'new'} (absent)"]


def test_a_failed_validate_writes_no_file_of_the_set(run_module, tmp_path):
    """The first file would pass, the second fails its check: neither destination changes (template's validate
    semantics, kept across the whole set)."""
    (tmp_path / "first").write_text("keep\n")
    failed, result = run_module(file_set, {"files": [
        spec(tmp_path / "first", "good\n", validate="grep -q good %s"),
        spec(tmp_path / "second", "bad\n", validate="grep -q good %s")]})
    assert failed
    assert result["msg"].startswith("file_set: nothing was written. ")
    assert f"{tmp_path / 'second'}: validate (grep -q good %s) failed with rc 1" in result["msg"]
    assert (tmp_path / "first").read_text() == "keep\n" and not (tmp_path / "second").exists()
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".file_set.")]


def test_validate_sees_the_new_content(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "c", "good\n", validate="grep -q good %s")]})
    assert not failed, result
    assert (tmp_path / "c").read_text() == "good\n"


def test_a_missing_folder_is_created_only_with_parent_mode(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "d" / "f", "x\n")]})
    assert failed and "its folder" in result["msg"] and "parent_mode" in result["msg"]
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "d" / "f", "x\n", parent_mode="0750")]})
    assert not failed, result
    assert mode_of(tmp_path / "d") == 0o750 and (tmp_path / "d" / "f").read_text() == "x\n"


def test_a_file_that_cannot_be_staged_writes_none_and_leaves_no_temporary_file(run_module, tmp_path):
    """lvs_director writes a pending-reload marker and keepalived.conf in the same set as its other files: when a
    later file's folder is missing, the marker staged before it must not stay behind as a temporary file, and neither
    destination may change."""
    failed, result = run_module(file_set, {"files": [
        spec(tmp_path / "marker", "pending\n"), spec(tmp_path / "missing" / "f", "x\n")]})
    assert failed and result["msg"].startswith("file_set: nothing was written. ")
    assert "its folder" in result["msg"] and not (tmp_path / "marker").exists()
    assert os.listdir(tmp_path) == []


def test_diff_false_keeps_a_secret_out_of_the_diff(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "s", "auth_pass hunter2\n", diff=False)],
                                           "_ansible_diff": True})
    assert not failed
    assert "hunter2" not in str(result["diff"])
    # Nor anywhere else in the result: the invocation's arguments hold the content too.
    assert "hunter2" not in json.dumps(result)
    assert (tmp_path / "s").read_text() == "auth_pass hunter2\n"


def test_a_file_with_diff_left_on_shows_its_content(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "plain", "weight 3\n")], "_ansible_diff": True})
    assert not failed and "weight 3" in str(result["diff"])


def test_a_path_given_twice_is_refused(run_module, tmp_path):
    failed, result = run_module(file_set, {"files": [spec(tmp_path / "x", "1\n"), spec(tmp_path / "x", "2\n")]})
    assert failed and "each path may appear once" in result["msg"]
    assert not (tmp_path / "x").exists()


def test_dest_names_the_destination_as_copy_and_template_call_it(run_module, tmp_path):
    # The lvs_director role hands its lvs_director_script_files entries ({dest, content}) over as they are.
    failed, result = run_module(file_set, {"files": [{"dest": str(tmp_path / "chk"), "content": "#!/bin/sh\n",
                                                      "mode": "0755"}]})
    assert not failed, result
    assert result["changed_paths"] == [str(tmp_path / "chk")] and mode_of(tmp_path / "chk") == 0o755
