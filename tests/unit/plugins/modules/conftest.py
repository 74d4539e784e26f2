"""Run a module's main() in-process with real argument handling and read back the JSON it prints."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import _internal as module_internal
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args


@pytest.fixture
def run_module(capsys, monkeypatch):
    """run_module(module, args) -> (failed, result): main() through AnsibleModule, exit_json/fail_json and all.

    Each run is set up like a fresh module process on a host: no warnings recorded yet, and not the controller
    (tests of controller-side plugins in the same session switch that flag, which would send warnings to the screen).
    """

    def run(module, args):
        capsys.readouterr()
        monkeypatch.setattr(module_warnings, "_global_warnings", {})
        monkeypatch.setattr(module_internal, "is_controller", False)
        with patch_module_args(args), pytest.raises(SystemExit) as exited:
            module.main()
        result = json.loads(capsys.readouterr().out)
        assert (exited.value.code != 0) == bool(result.get("failed")), result
        return bool(result.get("failed")), result

    return run
