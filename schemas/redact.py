"""Credentials never reach a record or a log: the redacted form of a source spec or a text.

A clone URL may carry a user and password (``https://user:TOKEN@host/o/r``) or a secret in its
query (``?private_token=...``, a signed URL's ``sig``). The clone itself uses the spec as given;
everything written (records, rejections, logs, messages) carries ``redact_source(spec)``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Query parameters that hold a secret (compared lowercased, "-" read as "_").
SECRET_PARAMS = frozenset(
    {
        "token",
        "access_token",
        "private_token",
        "refresh_token",
        "id_token",
        "auth",
        "auth_token",
        "key",
        "api_key",
        "apikey",
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "client_secret",
        "sig",
        "signature",
        "credential",
        "credentials",
        "session_token",
        "security_token",
        "x_amz_signature",
        "x_amz_credential",
        "x_amz_security_token",
        "x_goog_signature",
        "x_goog_credential",
    }
)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]*@")
_QUERY_PARAM = re.compile(r"([?&;])([A-Za-z0-9_.-]+)=([^&;#\s\"']*)")


def secret_param(name: str) -> bool:
    key = name.lower().replace("-", "_")
    return key in SECRET_PARAMS or key.endswith(("_token", "_secret", "_password", "_key"))


def redact_source(spec: str) -> str:
    """``spec`` without userinfo or secret query parameters; anything else is kept as it is.

    Deterministic, so the redacted form can key caches and environments.
    """
    if "://" not in spec:
        return spec  # a local path, pypi:NAME or git@host:owner/name (the user "git" is no secret)
    try:
        parts = urlsplit(spec)
        host = parts.netloc.rpartition("@")[2]
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    except ValueError:
        return redact_text(spec)
    kept = [(k, v) for k, v in query if not secret_param(k)]
    new_query = urlencode(kept) if len(kept) != len(query) else parts.query
    return urlunsplit((parts.scheme, host, parts.path, new_query, parts.fragment))


def redact_text(text: str) -> str:
    """Every URL's userinfo and every secret query value in free text (a message, a log tail)."""
    text = _USERINFO.sub(r"\1", text)

    def value(match: re.Match[str]) -> str:
        if secret_param(match.group(2)):
            return f"{match.group(1)}{match.group(2)}=REDACTED"
        return match.group(0)

    return _QUERY_PARAM.sub(value, text)
