#!/bin/bash
# kernel-complaints.sh <console.log> <dmesg.txt> ...: prints every line of a
# guest's logs that is a kernel complaint - KASAN, UBSAN, lockdep, kmemleak,
# WARN, BUG, oops, DMA-API debug errors ("DMA-API: <driver> <device>: ...",
# not its boot lines, nor its switching itself off after an allocation
# failure the fuzz case injected; it prints only its first error: the guest
# suite also checks its error count). Exit 0 when there is one, 1 when the
# logs are clean. Used by tests/run-all.sh and tests/check-one.sh.
exec grep -hE 'BUG:|WARNING:|Oops|KASAN|UBSAN|DMA-API: [^ ]+ [^ ]+: |possible circular locking|possible recursive locking|unreferenced object|general protection|Call Trace' "$@" 2> /dev/null
