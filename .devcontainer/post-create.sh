#!/usr/bin/env bash
# Runs once when the dev container is created: a C++ compiler for the CUDA emulation (the Python image has
# g++; installed where it lacks one), then the course's own setup into .venv/ (torch's CPU build, Triton,
# Numba, JupyterLab), as on any Linux machine. Open a notebook in VS Code with the .venv kernel, or run
# `python3 course.py lab --no-browser` and open the forwarded port 8888.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo -n); fi
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
fi
exec "${COURSE_PYTHON:-python3}" course.py setup
