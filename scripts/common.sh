# Sourced by the scripts in this directory; not meant to be run on its own.

KILN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KILN_DEBIAN_PACKAGES=(libeigen3-dev libxsimd-dev doctest-dev libbenchmark-dev cmake g++ make)

kiln_package_installed() {
  local status
  status=$(dpkg -s "$1" 2>/dev/null | sed -n 's/^Status: //p') || return 1
  [[ $status == "install ok installed" ]]
}

# Installs whichever of KILN_DEBIAN_PACKAGES are missing; does nothing when all are present.
kiln_install_deps() {
  if ! command -v dpkg >/dev/null 2>&1; then
    echo "kiln: not a Debian system, assuming the build dependencies are installed" >&2
    return 0
  fi

  local missing=() pkg
  for pkg in "${KILN_DEBIAN_PACKAGES[@]}"; do
    kiln_package_installed "$pkg" || missing+=("$pkg")
  done
  ((${#missing[@]} > 0)) || return 0

  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "kiln: missing packages (${missing[*]}) and neither root nor sudo to install them" >&2
      return 1
    fi
  fi

  echo "kiln: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}
