"""Loaded by pytest before its plugins (``-p tests.lean_imports`` in pyproject.toml's addopts).

nbval imports nbformat, which imports jsonschema, which imports the optional package rfc3987-syntax when it is
installed (JupyterLab's jupyter-events asks for it); that package compiles 39 Lark grammars as it is imported:
about 5 s of CPU in every pytest process before its first test. It serves only jsonschema's "iri" formats,
which no notebook's schema uses; marked absent here, jsonschema goes without it, as where it is not installed.
"""
import sys

sys.modules.setdefault("rfc3987_syntax", None)   # None in sys.modules: `import rfc3987_syntax` raises ImportError
