"""auditwheel repair, carrying every library a slim system may lack.

The manylinux policies let a wheel take some libraries from the system it is installed on
(X11, GLib, expat, zlib, ...) and auditwheel does not copy those. tensorscoped reaches
several of them through its own dependencies (Debian's OpenCV and FFmpeg), and a slim
container (python:3.x-slim, a cluster's minimal image) has none of them. This runs
auditwheel (the pinned version of python/requirements-wheel.txt) with those libraries
left out of every policy's list, so that it copies them into the wheel like any other:
only glibc's own libraries, libgcc_s and libstdc++ (whose symbol versions the policy
checks) come from the system.

    python repair_wheel.py repair [auditwheel repair's arguments]
    python repair_wheel.py --system-libraries     the libraries left to the system, one a line

Run by scripts/build_wheel.sh, in the venv of python/requirements-wheel.txt.
"""

import sys

# What every glibc system has: the C library and its parts, the compiler's runtime.
SYSTEM_LIBRARIES = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "libanl.so.1", "libmvec.so.1", "ld-linux-x86-64.so.2",
    "libgcc_s.so.1", "libstdc++.so.6", "libatomic.so.1",
})


def _carry_the_rest():
    from auditwheel import policy

    fixup = policy._fixup_musl_libc_soname  # where each policy's list is read (auditwheel 6.8)

    def system_only(libc, arch, whitelist):
        return frozenset(fixup(libc, arch, whitelist)) & SYSTEM_LIBRARIES

    policy._fixup_musl_libc_soname = system_only


def main():
    if sys.argv[1:] == ["--system-libraries"]:
        print("\n".join(sorted(SYSTEM_LIBRARIES)))
        return 0
    _carry_the_rest()
    from auditwheel.main import main as auditwheel_main

    sys.argv[0] = "auditwheel"
    return auditwheel_main()


if __name__ == "__main__":
    sys.exit(main())
