#!/usr/bin/env bash
# Installs, on a fresh Debian/Ubuntu machine, the system packages Kiln's build and tests need,
# and only those that are missing. Usage: scripts/ensure-deps.sh [vulkan] [elixir] [valgrind] [venv] [haproxy]
set -euo pipefail
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(vulkan)
pkgs=()
for w in "${want[@]}"; do
  case "$w" in
    vulkan)
      ldconfig -p | grep -q 'libvulkan.so.1' || pkgs+=(libvulkan1)
      ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || pkgs+=(mesa-vulkan-drivers)
      # Mesa's llvmpipe through OpenGL too: a second adapter (core/tests/two_devices.rs).
      ldconfig -p | grep -q 'libEGL_mesa.so.0' || pkgs+=(libegl1 libegl-mesa0)
      ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1 || pkgs+=(libgl1-mesa-dri) ;;
    elixir)
      # Erlang/OTP only: Elixir itself is Kiln's pinned build (scripts/mix), made with erlc.
      command -v erlc >/dev/null 2>&1 || pkgs+=(erlang-nox)
      [ -n "$(find /usr/lib/erlang -name erl_nif.h 2>/dev/null | head -1)" ] || pkgs+=(erlang-dev) ;;
    valgrind)
      command -v valgrind >/dev/null 2>&1 || pkgs+=(valgrind) ;;
    pkgconfig)
      command -v pkg-config >/dev/null 2>&1 || pkgs+=(pkg-config) ;;
    haproxy)
      # The load balancer of the replica test (scripts/serve-replicas.py, make serve-replicas).
      command -v haproxy >/dev/null 2>&1 || pkgs+=(haproxy) ;;
    venv)
      python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv) ;;
    *) echo "ensure-deps: unknown group $w" >&2; exit 2 ;;
  esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "ensure-deps: installing ${pkgs[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
