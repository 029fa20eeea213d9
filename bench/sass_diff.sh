#!/usr/bin/env bash
# Whether a change left a CUDA file's kernels as they were: compiles FILE at
# REV and in the working tree for one arch (cubin, -O3, the plugin's include
# folders) and compares each kernel's SASS instruction by instruction, labels,
# internal call names and the kernel's own name in returns aside. Kernels whose
# mangled name differs only by template arguments appended at the end with
# their default value (e.g. a new `int NT = 1`: Li1E) are paired by
# DEFAULT_SUFFIX.
#
#   bash bench/sass_diff.sh REV FILE [ARCH]
#   DEFAULT_SUFFIX=Li1E bash bench/sass_diff.sh c7e04fa plugins/ops_common/cuda_quant.cu
# NOW_FILES (space-separated): the working tree's files that hold FILE's
# kernels at REV, where they have moved between files since, e.g.
#   NOW_FILES="plugins/ops_common/cuda_quant.cu plugins/ops_common/cuda_qmma_gemv_awq4.cu
#     plugins/ops_common/cuda_qmma_gemv_int8.cu" bash bench/sass_diff.sh 6fc16a4 \
#     plugins/ops_common/cuda_quant.cu
#
# Needs nvcc and nvdisasm (NVDISASM=path; off a GPU machine PyPI's
# nvidia-cuda-nvdisasm wheel carries one). Prints a line a kernel that differs
# and a summary; exits 1 if any kernel of REV differs or is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: sass_diff.sh REV FILE [ARCH]}
file=${2:?usage: sass_diff.sh REV FILE [ARCH]}
arch=${3:-sm_90a}
nvdisasm=${NVDISASM:-nvdisasm}
command -v "$nvdisasm" >/dev/null || { echo "sass_diff.sh: no nvdisasm (NVDISASM=...)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive "$rev" | tar -x -C "$work" || exit 2
read -r -d '' -a now_files <<<"${NOW_FILES:-$file}" # any whitespace, newlines too
sass() { # SRC_ROOT OUT FILE...: every FILE's SASS, one after the other, in OUT.sass
  local root=$1 out=$2 f
  shift 2
  : >"$out.sass"
  for f in "$@"; do
    (cd "$root" && nvcc -cubin -arch="$arch" -O3 -std=c++17 -Icore/include -I"$(dirname "$f")" \
      "$f" -o "$out.cubin") && "$nvdisasm" -c "$out.cubin" >>"$out.sass" || return 1
  done
}
sass "$work" "$work/old" "$file" && sass "$PWD" "$work/new" "${now_files[@]}" || exit 2
python3 - "$work/old.sass" "$work/new.sass" "${DEFAULT_SUFFIX:-}" <<'PY'
import re, sys
def kernels(path):
    parts = re.split(r'\n\.text\.(\S+):', open(path).read())
    out = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        ins = []
        for line in body.split('\n'):
            m = re.match(r'\s*/\*[0-9a-f]+\*/\s*(.*?);', line)
            if m:
                x = re.sub(r'\.L_x_\d+', 'L', m.group(1))
                x = re.sub(r'__internal_\d+_', '__internal_N_', x)
                x = re.sub(r'\(_Z\S+\)', '(K)', x)
                ins.append(re.sub(r'\s+', ' ', x).strip())
        out[name] = ins
    return out
old, new, suffix = kernels(sys.argv[1]), kernels(sys.argv[2]), sys.argv[3]
def paired(name):
    """name's kernel in the working tree: the same name, or (SUFFIX) the name
    with default template arguments appended to its template argument list."""
    if name in new:
        return new[name]
    i = name.rfind('EEv')
    if suffix and i >= 0:
        return new.get(name[:i + 1] + suffix + name[i + 1:])
    return None
same, bad = 0, 0
for name, ins in old.items():
    other = paired(name)
    if other == ins:
        same += 1
    else:
        bad += 1
        print(('missing ' if other is None else 'differs ') + name)
print(f'{same} of {len(old)} kernels of the revision instruction for instruction the same; '
      f'{len(new) - len(old)} more in the working tree')
sys.exit(1 if bad else 0)
PY
