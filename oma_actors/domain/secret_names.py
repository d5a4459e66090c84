"""Which names look like they hold a secret (spec RD-08): one list for every rule that asks.

The store and journal redaction (``oma_actors.stores.redaction``) masks the values under such
names; task metadata (``oma_actors.domain.metadata``) refuses such keys outright. The pattern
follows OMA's ``utils/redaction.ts``: ASCII case folding, searched anywhere in the name.
"""

from __future__ import annotations

import re

_SENSITIVE_NAME = re.compile(
    r"api[_-]?key|apiKey|secret|password|passwd|pwd|private[_-]?key|privateKey"
    r"|access[_-]?key|accessKey|accessToken|refreshToken|idToken|githubToken|authorization"
    r"|auth[_-]?token|authToken|cookie|session|credential|bearer"
    r"|^token\Z|[_-]token\Z|^token[_-]",
    re.IGNORECASE | re.ASCII,
)


def is_sensitive_name(name: str) -> bool:
    """Whether a key or assignment name looks like it holds a secret (RD-08).

    The match is a case-insensitive search, so ``sessionId`` and ``clientSecret`` are sensitive.
    ``token`` counts only exactly or as a ``-``/``_`` separated prefix or suffix, so
    ``input_tokens`` is not sensitive while ``github_token`` and ``token_type`` are.
    """
    return _SENSITIVE_NAME.search(name) is not None
