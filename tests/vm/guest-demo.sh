#!/bin/bash
# Runs inside the VM for 'make demo': two Soft-RoCE nodes, the module, and
# tests/rdma_demo (an RDMA WRITE into a strixpeer buffer, verified).
set -u
ko=$1
out=${SP_OUT:?}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
{
	echo "guest: Linux $(uname -r), $(nproc) CPUs, $(ls -d /sys/devices/system/node/node* | wc -l) NUMA nodes"
	tests/vm/rxe-setup.sh > "$out/rxe-setup.log" 2>&1 || { echo "Soft-RoCE setup failed:"; cat "$out/rxe-setup.log"; exit 1; }
	echo "guest: Soft-RoCE devices: $(rdma link show | awk '{print $2, "on", $NF}' | tr '\n' ' ')"
	modprobe drm && insmod "$ko" || exit 1
	echo "guest: strixpeer loaded ($(build/strixpeerctl version | awk '/^module/ {print $2}'))"
	echo
	build/tests/rdma_demo
	rc=$?
	echo
	build/strixpeerctl status
	exit $rc
} 2>&1 | tee "$out/demo.txt"
exit "${PIPESTATUS[0]}"
