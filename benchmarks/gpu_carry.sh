#!/usr/bin/env bash
# Fills .gpu_carry/ (git-ignored) with the wheels benchmarks/benchmark_gpu.py needs on the device machine, which has
# Python 3.12, torch 2.11.0 (CUDA 13), accelerate 1.15, huggingface_hub 1.33, tokenizers 0.23, safetensors 0.8, typer
# and no package registry:
#   - this checkout's wheel, transformers 5.25.0+trainedprecision.N.g<sha> (isolated build: pip fetches the pinned
#     upstream release as the build requirement);
#   - torch-optimi 0.3.3 (pure Python; its Triton kernels use the device's triton);
#   - torchao 0.18.0: its first release built against torch 2.11 (it loads its compiled extensions on torch >= 2.11.0
#     only; the 8-bit AdamW it is carried for is Python + torch.compile);
#   - regex: transformers 5.23 checks regex >= 2025.10.22 at import, and the device's version is not on record.
# Run it here (any machine with pip and network), then the one `run` command of benchmarks/README.md ("GPU").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
dest="$root/.gpu_carry"
tmp="$dest.tmp"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
mkdir -p "$tmp"

"$python" -m pip wheel -q --no-deps -w "$tmp" "$root"
# the device's interpreter: CPython 3.12 on x86-64 Linux (pip matches each manylinux tag exactly)
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    platforms+=(--platform "$tag")
done
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$tmp" torch-optimi==0.3.3 torchao==0.18.0 regex==2026.11.19

# one version of each package, or the install on the device refuses them all
names=$(cd "$tmp" && ls -1 ./*.whl | sed -E 's#^\./([^-]+)-.*#\1#' | sort)
if [[ -n "$(uniq -d <<<"$names")" ]]; then
    echo "gpu_carry: more than one wheel of: $(uniq -d <<<"$names" | tr '\n' ' ')" >&2
    exit 1
fi
size=$(du -sm "$tmp" | cut -f1)
if ((size > 48)); then
    echo "gpu_carry: $size MiB of wheels; the device's working-tree limit is 64 MiB in all" >&2
    exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
echo "gpu_carry: $size MiB in ${dest#"$root"/}/:"
ls -1 "$dest"
