#!/usr/bin/env bash
# Makes the GPU-node bundle (DESIGN.md, "Build variants"): medprof-server, medprof-agent and the
# medprof CLI from a Debian 12 build, stripped, plus every shared library `ldd` lists for them
# except glibc's own, in .carry/bundle/ (git-ignored; it travels with the tree to a machine that
# has CUDA and PyTorch but no gRPC or SQLite, such as the H200 machine). Run it here, on Debian:
#
#   scripts/bundle.sh [--build-dir DIR] [--out DIR] [--no-carry]
#
#   --build-dir DIR  the Debian build holding bin/{medprof-server,medprof-agent,medprof}
#                    (default: $MEDPROF_BUILD_DIR, else build/)
#   --out DIR        where the bundle goes (default: .carry/bundle)
#   --no-carry       do not run scripts/make-carry.sh when .carry/usr is missing
#
# Layout: bin/<program> is a launcher that puts lib/ first on LD_LIBRARY_PATH and execs
# libexec/<program>; it saves the caller's LD_LIBRARY_PATH in MEDPROF_HOST_LD_LIBRARY_PATH, and
# bin/host-exec restores it, so that a program started by the bundled agent (medprof-worker,
# built on the GPU machine against its own libstdc++ and LibTorch) never sees Debian's
# libraries. scripts/make-carry.sh empties .carry/: run it first (this script does when
# .carry/usr is missing), then this one. The bundle and .carry together must stay well under
# the 64 MiB a device call carries; the script prints both sizes and fails above 48 MiB.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MEDPROF_BUILD_DIR:-${root}/build}"
out="${root}/.carry/bundle"
make_carry=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-carry) make_carry=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bundle.sh: unknown option '$1' (allowed: --build-dir DIR, --out DIR, --no-carry)" >&2; exit 1 ;;
  esac
done
programs=(medprof-server medprof-agent medprof)
limit_mib=48

for p in "${programs[@]}"; do
  [ -x "${build}/bin/${p}" ] || {
    echo "bundle.sh: ${build}/bin/${p} is missing; build it first: cmake --build ${build} --target ${programs[*]}" >&2
    exit 1; }
done
if [ "${make_carry}" = 1 ] && [ ! -d "${root}/.carry/usr" ]; then
  echo "bundle.sh: .carry/usr is missing; running scripts/make-carry.sh (Abseil and CLI11 for the worker build)"
  "${root}/scripts/make-carry.sh"
fi

# glibc's own objects come from the machine the bundle runs on; everything else travels.
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|\
    libresolv.so.*|libutil.so.*|libanl.so.*|libmvec.so.*|libnsl.so.*|libBrokenLocale.so.*) return 0 ;;
  esac
  return 1
}

rm -rf "${out}"
mkdir -p "${out}/bin" "${out}/libexec" "${out}/lib"
declare -A seen=()
for p in "${programs[@]}"; do
  install -m 0755 "${build}/bin/${p}" "${out}/libexec/${p}"
  strip --strip-unneeded "${out}/libexec/${p}"
  # ldd lines: "libfoo.so.1 => /usr/lib/.../libfoo.so.1 (0x...)"; "not found" is an error.
  if ldd "${build}/bin/${p}" | grep -q 'not found'; then
    echo "bundle.sh: ldd ${p} reports a missing library:" >&2
    ldd "${build}/bin/${p}" | grep 'not found' >&2
    exit 1
  fi
  while read -r name path; do
    is_glibc "${name}" && continue
    [ -n "${seen[${name}]:-}" ] && continue
    seen[${name}]=1
    # Copy the file itself under its soname (cp -L follows the soname link).
    cp -L "${path}" "${out}/lib/${name}"
    chmod 0644 "${out}/lib/${name}"
    strip --strip-unneeded "${out}/lib/${name}" 2>/dev/null || true
  done < <(ldd "${build}/bin/${p}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done

# The launchers. One text, one copy per program (copies, not links: links do not travel).
for p in "${programs[@]}"; do
  cat >"${out}/bin/${p}" <<EOF
#!/usr/bin/env bash
# Bundle launcher made by scripts/bundle.sh: runs libexec/${p} with the bundle's libraries.
here="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "\${MEDPROF_HOST_LD_LIBRARY_PATH+x}" ]; then
  export MEDPROF_HOST_LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:-}"
fi
export LD_LIBRARY_PATH="\${here}/lib\${LD_LIBRARY_PATH:+:\${LD_LIBRARY_PATH}}"
exec "\${here}/libexec/${p}" "\$@"
EOF
  chmod 0755 "${out}/bin/${p}"
done
cat >"${out}/bin/host-exec" <<'EOF'
#!/usr/bin/env bash
# Bundle helper made by scripts/bundle.sh: runs PROGRAM with the LD_LIBRARY_PATH the caller of a
# bundle launcher had (MEDPROF_HOST_LD_LIBRARY_PATH), so that a host program started by a
# bundled one (the worker, started by the agent) loads the host's libraries, not the bundle's.
#   host-exec PROGRAM [ARGS...]
if [ -n "${MEDPROF_HOST_LD_LIBRARY_PATH+x}" ]; then
  if [ -n "${MEDPROF_HOST_LD_LIBRARY_PATH}" ]; then
    export LD_LIBRARY_PATH="${MEDPROF_HOST_LD_LIBRARY_PATH}"
  else
    unset LD_LIBRARY_PATH
  fi
fi
exec "$@"
EOF
chmod 0755 "${out}/bin/host-exec"
{
  echo "made by scripts/bundle.sh on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "from ${build} (git $(git -C "${root}" rev-parse --short HEAD 2>/dev/null || echo unknown))"
  . /etc/os-release && echo "built on ${PRETTY_NAME}"
} >"${out}/BUNDLE.txt"

# Every program must load with the bundle's libraries alone (plus glibc).
for p in "${programs[@]}"; do
  if LD_LIBRARY_PATH="${out}/lib" ldd "${out}/libexec/${p}" | grep -q 'not found'; then
    echo "bundle.sh: ${p} does not resolve with ${out}/lib" >&2; exit 1
  fi
  "${out}/bin/${p}" --version >/dev/null
done

nlibs=$(find "${out}/lib" -type f | wc -l)
bundle_kib=$(du -sk "${out}" | cut -f1)
echo "bundle.sh: ${out}: ${#programs[@]} programs, ${nlibs} libraries, $((bundle_kib / 1024)) MiB"
# What travels to the GPU machine is all of .carry (the bundle and make-carry.sh's packages).
total_dir="${out}"
case "${out}" in "${root}/.carry"/*) total_dir="${root}/.carry" ;; esac
total_kib=$(du -sk "${total_dir}" | cut -f1)
[ "${total_dir}" = "${out}" ] || echo "bundle.sh: ${total_dir} holds $((total_kib / 1024)) MiB in all"
if [ "${total_kib}" -gt $((limit_mib * 1024)) ]; then
  echo "bundle.sh: ${total_dir} is over ${limit_mib} MiB; a device call carries 64 MiB with the tree" >&2
  exit 1
fi
