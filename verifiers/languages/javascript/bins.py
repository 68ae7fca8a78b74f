"""The file node runs for an installed runner: named by the package's own package.json ``bin``
(in ``node_modules``, root's and never the patch's), not ``node_modules/.bin``, whose entries
are shell scripts under pnpm, which node cannot run."""

from __future__ import annotations

import json
import posixpath


def package_bin(package_json: bytes | None, package: str, names: tuple[str, ...]) -> str:
    """``node_modules/PACKAGE/...`` for the first of ``names`` the package declares; "" when it
    declares none of them or its file cannot be read (a path leaving the package is none)."""
    try:
        bins = json.loads(package_json or b"")["bin"]
    except (ValueError, KeyError, TypeError):
        return ""
    if isinstance(bins, str):
        bins = {package: bins}
    if not isinstance(bins, dict):
        return ""
    for name in names:
        target = bins.get(name)
        if isinstance(target, str):
            path = posixpath.normpath(posixpath.join("node_modules", package, target))
            if path.startswith(f"node_modules/{package}/"):
                return path
    return ""
