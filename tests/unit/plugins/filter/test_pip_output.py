"""Filters pip_error_lines and redact_url_credentials (plugins/filter/pip_output.py).

The stderr below has pip 23's shape for an index that refuses connections: pip prints the index with the password
masked by its own redact_auth_from_url ("user:****@", pip/_internal/utils/misc.py), one "WARNING: Retrying" line per
retry, then "ERROR:" lines. A traceback or an exception text can still carry the raw URL, which is what the role's
message must not show.
"""

from __future__ import annotations

from ansible_collections.hpc.balance.plugins.filter.pip_output import pip_error_lines, redact_url_credentials

PIP_STDERR = (
    "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken "
    "by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a "
    "new connection: [Errno 111] Connection refused')': /simple/torch/\n"
    "WARNING: Retrying (Retry(total=0)) after connection broken: http://ci-bot:s3cr3t-token@198.18.0.1:9/simple/torch/\n"
    "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)\n"
    "ERROR: No matching distribution found for torch==2.13.0\n"
)


def test_the_last_retry_and_every_error_line_are_kept():
    lines = pip_error_lines({"rc": 1, "stderr": PIP_STDERR}).split(" | ")
    assert len(lines) == 3
    assert lines[0].startswith("WARNING: Retrying (Retry(total=0)) after connection broken: http://ci-bot")
    assert lines[1:] == [
        "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)",
        "ERROR: No matching distribution found for torch==2.13.0",
    ]


def test_without_error_lines_the_tail_and_then_the_message_are_used():
    tail = "\n".join(f"line {n}" for n in range(10))
    assert pip_error_lines({"stderr": tail}) == " | ".join(f"line {n}" for n in range(4, 10))
    assert pip_error_lines({"msg": "non-zero return code"}) == "non-zero return code"
    assert pip_error_lines(None) == "no message"


def test_every_urls_credentials_are_replaced_and_nothing_else():
    text = pip_error_lines({"stderr": PIP_STDERR}) + " https://token@idx.example/simple file:///srv/wheels x@y"
    redacted = redact_url_credentials(text)
    assert "s3cr3t" not in redacted and "ci-bot" not in redacted and "token@" not in redacted
    assert "http://***@198.18.0.1:9/simple/torch/" in redacted
    assert "https://***@idx.example/simple" in redacted
    assert "file:///srv/wheels x@y" in redacted  # no userinfo: untouched, and a bare a@b is not a URL
    assert redact_url_credentials(None) == ""
