# Sourced by benchmarks/gpu.sh and gpu_suites.sh: put the checkout on the path when canter is not
# installed, and check that jax sees a GPU (anything goes with --tiny) and that the packages
# the script needs are there.
#   gpu_setup SCRIPT_NAME TINY(0/1) MODULE...   (uses $python)
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
    sys.exit(f"{name}: missing {', '.join(missing)}: install benchmarks/requirements-gpu.txt")
import jax

device = jax.devices()[0]
if device.platform != "gpu" and tiny != "1":
    sys.exit(f"{name}: jax sees no GPU (its first device is {device}); --tiny runs anywhere")
print(f"{name}: jax {jax.__version__} on {device.device_kind}", flush=True)
PY
}
