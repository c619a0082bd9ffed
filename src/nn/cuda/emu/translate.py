#!/usr/bin/env python3
"""Turns a .cu file of the cuda backend into C++ for the CPU emulator.

The only CUDA syntax the backend uses that a C++ compiler cannot read is
the launch `kernel<<<grid, block, shmem, stream>>>(args);`. It becomes
`sl_emu_launch(grid, block, shmem, stream, [=]() { kernel(args); });`,
which runs every thread of the grid on the CPU before it returns (see
cuda_runtime.h here). Usage: translate.py IN.cu OUT.cc
"""
import re
import sys

LAUNCH = re.compile(r"(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\)\s*;", re.S)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    out, n = LAUNCH.subn(lambda m: "sl_emu_launch(%s, [=]() { %s(%s); });"
                        % (m.group(2), m.group(1), m.group(3)), text)
    if "<<<" in out:
        sys.exit(f"{src}: a kernel launch the emulator cannot translate")
    with open(dst, "w") as f:
        f.write(f"// Generated from {src} by translate.py ({n} launches): do not edit.\n")
        f.write(f'#line 1 "{src}"\n')
        f.write(out)


if __name__ == "__main__":
    main()
