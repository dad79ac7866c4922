#!/bin/sh
# A build that never ends: Debian's gcc compiling 40 small C files two at a time, again and again, so
# `gcc`, `cc1` and `as` each live 10-50 ms. Used by the test `unwind_short_lived` and the bench's
# short-lived processes and busy-node sections (cargo xtask bench --build-only, --busy-only).
# Usage: build_loop.sh DIR   (writes the sources into DIR, then compiles until killed)
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
i=1
while [ "$i" -le 40 ]; do
    cat > "f$i.c" <<SRC
#include <stdio.h>
#include <string.h>
struct s$i { int a[$i]; double d; };
static int work$i(struct s$i *p, int n) { int t = 0; for (int k = 0; k < n; k++) t += p->a[k % $i] * k; return t; }
int fn$i(int n) { struct s$i v; memset(&v, 0, sizeof v); for (int j = 0; j < $i; j++) v.a[j] = j * n; return work$i(&v, n) + printf("%d\n", n); }
SRC
    i=$((i + 1))
done
while :; do
    ls f*.c | xargs -P 2 -n 1 gcc -O2 -c -o /dev/null || exit 1
done
