#!/usr/bin/env bash
# Installs this checkout the way users do (`pip install "transformers @ git+file://...@<branch>"`) into a fresh
# venv WITHOUT torch, then checks the version label, the config field and the CLI entry point.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${SMOKE_REF:-$(git -C "$root" rev-parse --abbrev-ref HEAD)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q "transformers @ git+file://$root@$ref"
out=$(cd "$tmp" && "$tmp/venv/bin/python" -c "
import importlib.util, transformers as t
assert importlib.util.find_spec('torch') is None, 'torch should not be installed here'
print(t.__version__, t.PreTrainedConfig().trained_precision)
")
echo "smoke: $out"
sha=$(git -C "$root" rev-parse --short=10 "$ref")
pin=$(sed -n 's/^requires = .*"transformers==\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")
[[ -n "$pin" && "$out" == "$pin+trainedprecision."*".g$sha unknown" ]] || { echo "smoke: unexpected output (want $pin+trainedprecision.N.g$sha unknown)"; exit 1; }
"$tmp/venv/bin/transformers" --help >/dev/null
echo "smoke: OK"
