#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# strixpeerctl gpu on the host, where no ROCm runtime is installed
# (tests/run-all.sh runs it after 'make user' and hip-examples-check):
# usage errors exit 2 naming the word; an absent runtime exits 4 naming
# the files tried; a library lacking an entry point (tests/gpurt/
# old-runtime.c, built here) exits 5 naming the symbol and the file;
# user/gpu/hiprt.h's declarations compile against sid's ROCm headers
# (tests/gpurt/abi-check.c) with every constant, size and offset checked.
# The runtime found and used: tests/guest/gpu-proof-guest.sh with the stand-in
# runtime, in the VM. Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
ctl=build/strixpeerctl
out=build/gpu-host
. tests/lib/tap.sh
rm -rf "$out"
mkdir -p "$out"

# expect <name> <status> <stdout|stderr> <grep -E pattern> -- <args...>
expect() {
	local name=$1 want=$2 stream=$3 pattern=$4 rc
	shift 5
	"$ctl" "$@" > "$out/stdout" 2> "$out/stderr"; rc=$?
	[ "$rc" -eq "$want" ] && grep -Eq -- "$pattern" "$out/$stream"
	result $? "$name" "strixpeerctl $*: exit $rc, stdout '$(head -c 200 "$out/stdout")', stderr '$(head -c 300 "$out/stderr")'"
}

if [ ! -x "$ctl" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP needs build/strixpeerctl ('make user')"
	exit 0
fi
unset STRIXPEER_HIP_LIB STRIXPEER_HSA_LIB

# usage
expect help 0 stdout '^usage: strixpeerctl \[-j\] gpu runtime \[--hip-lib FILE\] \[--hsa-lib FILE\]$' -- gpu help
expect help_proof 0 stdout '^       strixpeerctl \[-j\] gpu proof \[--kinds LIST\]' -- gpu proof --help
expect help_word 0 stdout '^usage: strixpeerctl \[-j\] gpu runtime' -- help gpu
expect help_runtime 0 stdout '^exit status: 0 found, 1 no usable GPU \(proof: a cell never right, or no$' -- gpu runtime --help
expect help_lists_gpu 0 stdout '^  gpu +runtime \| proof: ' -- help
expect unknown_command 2 stderr 'unknown command "frob"; see "strixpeerctl gpu help"' -- gpu frob
expect unknown_option 2 stderr 'runtime: unknown option "--frob", or it lacks its argument' -- gpu runtime --frob
expect missing_argument 2 stderr 'runtime: unknown option "--hip-lib", or it lacks its argument' -- gpu runtime --hip-lib
expect empty_file_name 2 stderr 'runtime: --hsa-lib needs a file name' -- gpu runtime --hsa-lib ''
expect extra_argument 2 stderr 'unexpected argument "now"; see "strixpeerctl gpu help"' -- gpu runtime now
expect runtime_refuses_proof_options 2 stderr 'runtime: unknown option "--size"' -- gpu runtime --size 4K
expect proof_unknown_kind 2 stderr 'proof: --kinds: unknown name "vram"' -- gpu proof --kinds malloc,vram
expect proof_unknown_route 2 stderr 'proof: --routes: unknown name "dma"' -- gpu proof --routes dma
expect proof_unknown_route_staging 2 stderr 'proof: --routes: unknown name "staging"' -- gpu proof --routes reg_mr,staging
expect proof_unknown_kind_import 2 stderr 'proof: --kinds: unknown name "sp-imported"' -- gpu proof --kinds sp-imported
expect help_names_staged 0 stdout '^  --routes LIST     reg_mr,sp_reg_mr,staged \(all; staged: hipMemcpy through a$' -- gpu proof --help
expect help_names_sp_import 0 stdout '^                    fine-grained,uncached,sp-hostreg,sp-import \(all\)$' -- gpu proof --help
expect proof_unknown_direction 2 stderr 'proof: --directions: unknown name "up"' -- gpu proof --directions up
expect proof_bad_size 2 stderr 'proof: --size takes a multiple of 4K up to 1G, not "5000"' -- gpu proof --size 5000
expect proof_bad_repeat 2 stderr 'proof: --repeat takes a number from 1 to 1000, not "0"' -- gpu proof --repeat 0
expect proof_same_devices 2 stderr 'proof: --local and --peer name the same device' -- gpu proof --local rxe0 --peer rxe0
# one word is HOST (two nodes), a second is too many
expect proof_extra 2 stderr 'unexpected argument "now"' -- gpu proof node-b now
# two nodes: --serve, HOST, --bind, --port
expect help_serve 0 stdout '^       strixpeerctl gpu proof --serve \[--bind ADDR\] \[--port N\]$' -- gpu proof --help
expect help_host 0 stdout '^       strixpeerctl \[-j\] gpu proof HOST \[--bind ADDR\] \[--port N\]' -- gpu proof --help
expect help_port 0 stdout "^  --port N          the server's librdmacm port \(18517\)$" -- gpu proof --help
expect serve_with_host 2 stderr 'unexpected argument "node-b" \(--serve takes no HOST\)' -- gpu proof --serve node-b
expect serve_with_matrix_option 2 stderr 'proof: --serve takes only --bind and --port, not --kinds' -- gpu proof --serve --kinds malloc
expect serve_with_numbers 2 stderr 'proof: --serve takes only --bind and --port, not --numbers' -- gpu proof --serve --numbers
expect serve_with_out 2 stderr 'proof: --serve takes only --bind and --port, not --out' -- gpu proof --serve --port 18517 --out x
expect port_zero 2 stderr 'proof: --port: bad port "0": 1..65535' -- gpu proof node-b --port 0
expect port_word 2 stderr 'proof: --port: bad port "http": 1..65535' -- gpu proof --serve --port http
expect port_big 2 stderr 'proof: --port: bad port "65536": 1..65535' -- gpu proof node-b --port 65536
expect bind_empty 2 stderr 'proof: --bind needs an address' -- gpu proof --serve --bind ''
expect bind_without_host 2 stderr 'proof: --bind and --port go with HOST or --serve' -- gpu proof --bind 10.0.0.1
expect port_without_host 2 stderr 'proof: --bind and --port go with HOST or --serve' -- gpu proof --port 18517
expect host_with_local 2 stderr 'proof: with HOST the devices are the route.s: --bind ADDR' -- gpu proof node-b --local rxe0
expect host_with_numbers 2 stderr 'proof: --numbers is measured on one node only for now: run it without HOST' -- gpu proof node-b --numbers
expect runtime_refuses_serve 2 stderr 'runtime: unknown option "--serve"' -- gpu runtime --serve
# HOST after the options too; the runtime is loaded before connecting
expect host_after_options 4 stderr "cannot load $PWD/$out/none.so" -- gpu proof --kinds malloc node-b --hip-lib "$PWD/$out/none.so"
expect json_usage_error 2 stderr 'unexpected argument "x"' -- -j gpu runtime x
# --numbers' options, --out
expect help_numbers 0 stdout '^  --numbers         also measure, for every cell with a verdict: the peer.s RDMA$' -- gpu proof --help
expect help_out 0 stdout '^  --out DIR         also write DIR/proof.json, DIR/proof.txt and \(with --numbers$' -- gpu proof --help
expect proof_min_msg_not_power 2 stderr 'proof: --min-msg takes a power of two from 4K to 1G, not "5000"' -- gpu proof --numbers --min-msg 5000
expect proof_min_msg_small 2 stderr 'proof: --min-msg takes a power of two from 4K to 1G, not "2K"' -- gpu proof --numbers --min-msg 2K
expect proof_max_msg_big 2 stderr 'proof: --max-msg takes a power of two from 4K to 1G, not "2G"' -- gpu proof --numbers --max-msg 2G
expect proof_min_above_max 2 stderr 'proof: --min-msg is larger than --max-msg' -- gpu proof --numbers --min-msg 64K --max-msg 16K
expect proof_bad_iters 2 stderr 'proof: --iters takes a number from 1 to 100000, not "0"' -- gpu proof --numbers --iters 0
expect proof_msg_without_numbers 2 stderr 'proof: --min-msg, --max-msg and --iters go with --numbers' -- gpu proof --max-msg 1M
expect proof_iters_without_numbers 2 stderr 'proof: --min-msg, --max-msg and --iters go with --numbers' -- gpu proof --iters 4
expect proof_out_empty 2 stderr 'proof: --out needs a directory' -- gpu proof --out ''
expect proof_out_missing_arg 2 stderr 'unknown option "--out", or it lacks its argument' -- gpu proof --out
expect proof_unknown_flag 2 stderr 'proof: unknown option "--numbers-only"' -- gpu proof --numbers-only
expect runtime_refuses_numbers 2 stderr 'runtime: unknown option "--numbers"' -- gpu runtime --numbers
: > "$out/a-file"
# --out is checked before the runtime is loaded: exit 1, not 4
expect proof_out_is_a_file 1 stderr "proof: --out $out/a-file: not a directory" -- gpu proof --numbers --out "$out/a-file" --hip-lib "$PWD/$out/none.so"
expect proof_out_cannot_create 1 stderr "proof: --out $out/a-file/sub: cannot create it: Not a directory" -- gpu proof --out "$out/a-file/sub" --hip-lib "$PWD/$out/none.so"
# a good --out is made, then the absent runtime stops the run
expect proof_out_made_then_absent 4 stderr "cannot load $PWD/$out/none.so" -- gpu proof --numbers --out "$out/made" --hip-lib "$PWD/$out/none.so"
[ -d "$out/made" ]
result $? proof_out_dir_created "no $out/made"

# absent
if ldconfig -p 2> /dev/null | grep -Eq 'libamdhip64\.so(\.[67])? '; then
	skip absent_default_names "this host has a libamdhip64 in ld.so's cache: the default search finds it"
else
	expect absent_default_names 4 stderr "ROCm's runtime is not installed: none of libamdhip64.so, libamdhip64.so.7, libamdhip64.so.6 loads \(STRIXPEER_HIP_LIB names another file\)" -- gpu runtime
fi
expect proof_absent 4 stderr "cannot load $PWD/$out/none.so" -- gpu proof --hip-lib "$PWD/$out/none.so"
# the new names are accepted: the command gets as far as loading the runtime
expect proof_accepts_staged_and_sp_import 4 stderr "cannot load $PWD/$out/none.so" \
	-- gpu proof --kinds sp-import,malloc --routes staged,reg_mr --hip-lib "$PWD/$out/none.so"
expect absent_option 4 stderr "cannot load $PWD/$out/none.so: .*No such file" -- gpu runtime --hip-lib "$PWD/$out/none.so"
STRIXPEER_HIP_LIB=$PWD/$out/env.so expect absent_env 4 stderr "cannot load $PWD/$out/env.so: .*No such file" -- -j gpu runtime
"$ctl" -j gpu runtime --hip-lib "$PWD/$out/none.so" > "$out/stdout" 2> /dev/null
[ ! -s "$out/stdout" ]
result $? absent_prints_no_json "stdout: '$(head -c 200 "$out/stdout")'"

# too old: a library with some entry points and not others
cc="${CC:-cc}"
if $cc -std=gnu11 -Wall -Wextra -Werror -fPIC -shared -DSP_OLD_HIP -o "$out/libold-hip.so" \
	tests/gpurt/old-runtime.c 2> "$out/cc.log" &&
	$cc -std=gnu11 -Wall -Wextra -Werror -fPIC -shared -DSP_OLD_HSA -o "$out/libold-hsa.so" \
	tests/gpurt/old-runtime.c 2>> "$out/cc.log"; then
	result 0 fixtures_build
	expect too_old_hip 5 stderr "$PWD/$out/libold-hip.so has no hipGetErrorString: the ROCm runtime is too old" \
		-- gpu runtime --hip-lib "$PWD/$out/libold-hip.so" --hsa-lib "$PWD/$out/libold-hsa.so"
	# the HSA library is loaded before any symbol is looked up
	expect hsa_absent 4 stderr "cannot load $PWD/$out/nohsa.so" \
		-- gpu runtime --hip-lib "$PWD/$out/libold-hip.so" --hsa-lib "$PWD/$out/nohsa.so"
else
	result 1 fixtures_build "$(cat "$out/cc.log")"
fi

# the declarations against ROCm's headers (hip-examples-check caches them)
inc=$(ls -d "${STRIXPEER_CACHE:-$HOME/.cache/strixpeer}"/rocm-headers/*/root/usr/include 2> /dev/null |
	sort -V | tail -n 1)
if [ -z "$inc" ] || [ ! -f "$inc/hip/hip_runtime_api.h" ] || [ ! -f "$inc/hsa/hsa_ext_amd.h" ]; then
	result 1 abi_matches_rocm_headers "no ROCm headers under \$STRIXPEER_CACHE/rocm-headers (tests/host/hip-examples-check.sh fetches them)"
else
	$cc -std=gnu11 -Wall -Wextra -Werror -D__HIP_PLATFORM_AMD__ -isystem "$inc" -Iuser \
		-fsyntax-only tests/gpurt/abi-check.c > "$out/abi.log" 2>&1
	result $? abi_matches_rocm_headers "$(head -c 600 "$out/abi.log")"
fi
finish
