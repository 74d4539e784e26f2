# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a failed pip run said, short and without credentials, for the message that stops gpu_moe.

An index URL may carry a user and a token (https://user:token@host/simple). The task that hands it to pip is no_log,
which hides its whole result, pip's error too; so the role registers the result and reports it through these filters.
pip masks the password in URLs it prints itself (pip's redact_auth_from_url), but not in every message (a
traceback, an environment dump), so every URL's user-information part is replaced here, RFC 3986 section 3.2.1.
"""

from __future__ import annotations

import re
from typing import Any

# scheme://userinfo@ where userinfo has no '/', '@' or space (RFC 3986: userinfo comes before the last '@' of the
# authority, which ends at the first '/').
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
# A pip error block starts with 'ERROR:'; the last 'WARNING: Retrying' names an index that does not answer.
ERROR_LINE = re.compile(r"^ERROR")
RETRY_LINE = re.compile(r"^WARNING: Retrying")
TAIL_LINES = 6


def redact_url_credentials(text: Any) -> str:
    """The text with every URL's user:password@ replaced by ***@."""
    return URL_CREDENTIALS.sub(r"\g<scheme>***@", "" if text is None else str(text))


def pip_error_lines(result: Any) -> str:
    """A registered pip (or fail) result -> its error lines joined by ' | ' (the last retry, then every ERROR line;
    else its last stderr lines; else its msg)."""
    result = result if isinstance(result, dict) else {}
    lines = [line for line in str(result.get("stderr") or "").splitlines() if line.strip()]
    retries = [line for line in lines if RETRY_LINE.match(line)][-1:]
    errors = [line for line in lines if ERROR_LINE.match(line)]
    chosen = retries + errors or lines[-TAIL_LINES:] or [str(result.get("msg") or "no message")]
    return " | ".join(chosen)


class FilterModule:
    """pip's error lines and URL credential redaction."""

    def filters(self) -> dict[str, Any]:
        return {"pip_error_lines": pip_error_lines, "redact_url_credentials": redact_url_credentials}
