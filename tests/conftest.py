"""pytest setup for the course's tests: the notebooks under tests/fixtures are inputs of
test_course.py (one of them fails on purpose), not notebooks for nbval to collect here."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
collect_ignore_glob = ["fixtures/*"]

# Tests run in the course's environment, where `import utils` works through the editable install;
# this keeps them working from a plain checkout too.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
