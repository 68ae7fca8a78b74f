"""One botocore data loader per process, shared by every boto3 session.

Beam's s3:// filesystem opens a new boto3 session for each file operation (a listing, an open, a
copy), and each session's loader parses botocore's S3 service model and endpoint rules again:
about 0.4 s of JSON per operation, 9 of a mine stage's 16 s on s3:// (22 sessions, measured with
cProfile). The loader only reads the data files botocore ships, so one instance serves every
session the same models.
"""

from __future__ import annotations

import functools

_SHARED = "_trajforge_shared"


def share_botocore_loader() -> None:
    """Make botocore's sessions take one cached loader per data path (idempotent)."""
    try:
        import botocore.session
    except ImportError:  # no boto3 here: no s3:// either
        return
    create = botocore.session.create_loader
    if getattr(create, _SHARED, False):
        return
    shared = functools.cache(create)
    setattr(shared, _SHARED, True)
    botocore.session.create_loader = shared
