# Sourced by benchmarks/gpu/gpu.sh and gpu_suites.sh.
#
#   gpu_args SCRIPT_NAME "$@"   (uses $steps): sets out, tiny and only from --out DIR, --tiny
#       and --only STEP..., refusing an unknown step or flag with exit 2
#   gpu_setup SCRIPT_NAME TINY(0/1) MODULE...   (uses $python): puts the checkout on the path
#       when canter is not installed, checks that the packages are there and that jax sees a
#       GPU (anything goes with --tiny)
gpu_args() {
    local name=$1
    shift
    local usage="usage: bash benchmarks/gpu/$name [--tiny] [--out DIR] [--only STEP...]"
    usage="$usage (steps: $steps)"
    while (($#)); do
        case "$1" in
            --tiny) tiny=1 ;;
            --out) out="$2"; shift ;;
            --only)
                while (($# > 1)) && [[ "$2" != --* ]]; do
                    [[ " $steps " == *" $2 "* ]] || { echo "$name: no step '$2'; $usage" >&2; exit 2; }
                    only="$only $2"
                    shift
                done ;;
            *) echo "$usage" >&2; exit 2 ;;
        esac
        shift
    done
}

gpu_setup() {
    local name=$1 tiny=$2
    shift 2
    if ! "$python" -c "import canter.algorithms" 2>/dev/null; then
        local shim
        shim=$(mktemp -d)
        mkdir "$shim/canter"
        ln -s "$PWD/algorithms" "$shim/canter/algorithms"
        ln -s "$PWD/common" "$shim/canter/common"
        export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
    fi
    "$python" - "$name" "$tiny" "$@" <<'PY'
import importlib.util
import sys

name, tiny, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
missing = [module for module in modules if importlib.util.find_spec(module) is None]
if missing:
    sys.exit(f"{name}: missing {', '.join(missing)}: install benchmarks/gpu/requirements-gpu.txt")
import jax

device = jax.devices()[0]
if device.platform != "gpu" and tiny != "1":
    sys.exit(f"{name}: jax sees no GPU (its first device is {device}); --tiny runs anywhere")
print(f"{name}: jax {jax.__version__} on {device.device_kind}", flush=True)
PY
}
