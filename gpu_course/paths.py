"""Where the course keeps what it measures: ``results/`` beside the notebooks (in a checkout of
the course), and the small file helpers the results and ceilings modules share."""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

# The checkout's root (the package lives in it). COURSE_RESULTS_DIR moves the results elsewhere.
ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(os.environ.get("COURSE_RESULTS_DIR", ROOT / "results"))


def now() -> str:
    """The time in UTC, as stored in results: ``'2026-11-23 07:50 UTC'``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def read_json(path: Path) -> dict:
    """The JSON object in ``path``, or ``{}`` if it is missing or unreadable.

    >>> read_json(Path("/nonexistent.json"))
    {}
    """
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
