#!/usr/bin/env bash
# End-to-end benchmark of `appliance image backup/restore` against restic on
# VM-like disk images made with real tools. Prints a Markdown report on stdout
# (docs/PERFORMANCE.md quotes it). Usage: scripts/bench.sh bin/appliance
#
# Data (generated here, nothing committed):
#   vm.img      4 GiB sparse ext4 built by mkfs.ext4 -d from a copy of /usr
#               (documentation, man pages, the Python library: ~280 MB)
#   vm2.img     vm.img changed in place by debugfs -w: ~50 MB of new files and
#               rewrites of existing ones (the layout does not shift)
#   clone.img   vm.img with another /etc/hostname (a clone of the template)
#   random.img  1 GiB of random data (dense, incompressible)
#   big.img     64 GiB sparse with 4 GiB of data, for peak memory
set -euo pipefail
APPLIANCE=$(readlink -f "${1:-bin/appliance}" || true) # BENCH_ONLY=data needs no binary
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-$ROOT/.bench}
RESTIC=${RESTIC:-$WORK/bin/restic}
export PATH="$PATH:/usr/sbin:/sbin"
mkdir -p "$WORK/bin"
if [ ! -x "$RESTIC" ] && [ "${BENCH_ONLY:-}" != data ]; then
	echo "building restic 0.18.0 (the peer) into $RESTIC" >&2
	GOBIN="$WORK/bin" go install github.com/restic/restic/cmd/restic@v0.18.0
fi
export RESTIC_PASSWORD=bench-password VMVAULT_PASSWORD=bench-password
IMG=$WORK/img
mkdir -p "$IMG"

log() { echo "$@" >&2; }

# --- data ---------------------------------------------------------------
if [ ! -f "$IMG/vm.img" ]; then
	log "making vm.img (mkfs.ext4 -d from /usr)"
	rm -rf "$IMG/tree" && mkdir -p "$IMG/tree/usr/share" "$IMG/tree/usr/lib" "$IMG/tree/etc"
	cp -a /usr/share/doc /usr/share/man "$IMG/tree/usr/share/"
	cp -a /usr/lib/python3.11 "$IMG/tree/usr/lib/"
	echo template > "$IMG/tree/etc/hostname"
	mkfs.ext4 -q -F -U 11111111-2222-4333-8444-555555555555 -E root_owner=0:0 -d "$IMG/tree" "$IMG/vm.img" 4G
	rm -rf "$IMG/tree"
fi
ONLY_CLASSES=; case "${BENCH_ONLY:-}" in classes | data) ONLY_CLASSES=1 ;; esac
if [ -z "$ONLY_CLASSES" ] && [ ! -f "$IMG/vm2.img" ]; then
	log "making vm2.img (debugfs -w: ~50 MB new files, rewrites)"
	cp --sparse=always "$IMG/vm.img" "$IMG/vm2.img"
	head -c 20000000 /dev/urandom > "$IMG/new1.bin"
	cat /usr/share/doc/*/copyright 2>/dev/null | head -c 30000000 > "$IMG/new2.txt" || true
	head -c 2000000 /dev/urandom > "$IMG/rewrite.bin"
	{
		echo "write $IMG/new1.bin new1.bin"
		echo "write $IMG/new2.txt new2.txt"
		echo "mkdir var"
		for i in 1 2 3 4 5 6 7 8 9 10; do echo "write $IMG/rewrite.bin var/log$i"; done
	} > "$IMG/debugfs.cmds"
	debugfs -w -f "$IMG/debugfs.cmds" "$IMG/vm2.img" >/dev/null 2>&1
fi
if [ -z "$ONLY_CLASSES" ] && [ ! -f "$IMG/changed.json" ]; then
	log "computing the changed blocks (what CBT would report)"
	go run "$ROOT/scripts/diffblocks" "$IMG/vm.img" "$IMG/vm2.img" > "$IMG/changed.json"
fi
if [ -z "$ONLY_CLASSES" ] && [ ! -f "$IMG/clone.img" ]; then
	cp --sparse=always "$IMG/vm.img" "$IMG/clone.img"
	echo clone-01 > "$IMG/hostname"
	debugfs -w -R "rm etc/hostname" "$IMG/clone.img" >/dev/null 2>&1
	debugfs -w -R "write $IMG/hostname etc/hostname" "$IMG/clone.img" >/dev/null 2>&1
fi
[ -f "$IMG/random.img" ] || head -c 1073741824 /dev/urandom > "$IMG/random.img"
if [ ! -f "$IMG/os.img" ]; then
	log "making os.img (mkfs.ext4 -d from a copy of /usr/lib/x86_64-linux-gnu: executables and libraries)"
	rm -rf "$IMG/tree" && mkdir -p "$IMG/tree/usr/lib"
	cp -a /usr/lib/x86_64-linux-gnu "$IMG/tree/usr/lib/"
	mkfs.ext4 -q -F -U 11111111-2222-4333-8444-555555555555 -E root_owner=0:0 -d "$IMG/tree" "$IMG/os.img" "${BENCH_OS_GIB:-4}G"
	rm -rf "$IMG/tree"
fi
if [ ! -d "$IMG/update" ]; then
	# The update the clones install: ~30 MB of shared libraries none of the
	# images holds (taken from /usr/lib/x86_64-linux-gnu; vm.img has none).
	mkdir -p "$IMG/update"
	total=0
	for f in $(find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' -size +200k -size -4M | sort); do
		cp "$f" "$IMG/update/"
		total=$((total + $(stat -c %s "$f")))
		[ "$total" -gt 30000000 ] && break
	done
fi
[ -x "$WORK/bin/diffblocks" ] || go build -o "$WORK/bin/diffblocks" "$ROOT/scripts/diffblocks"
if [ -z "$ONLY_CLASSES" ] && [ ! -f "$IMG/big.img" ]; then
	truncate -s 64G "$IMG/big.img"
	for i in $(seq 0 15); do
		dd if="$IMG/random.img" of="$IMG/big.img" bs=16M count=16 seek=$((i * 256 + 7)) conv=notrunc status=none
	done
fi

# BENCH_ONLY=data: only the three class images (vm.img, os.img, random.img),
# for the stage table (internal/benchstage, `make bench-stages`).
[ "${BENCH_ONLY:-}" = data ] && exit 0

# --- helpers -------------------------------------------------------------
# timed CMD...: runs CMD, sets SECS, CPU (user + system seconds) and RSS_MB
# (peak resident memory).
timed() {
	local out
	out=$( { /usr/bin/time -f '%e %M %U %S' "$@" >"$WORK/last.out" 2>"$WORK/last.err"; } 2>&1 ) || { cat "$WORK/last.err" >&2; return 1; }
	out=$(tail -1 "$WORK/last.err")
	read -r SECS RSS_KB U S <<<"$out"
	RSS_MB=$(( RSS_KB / 1024 ))
	CPU=$(awk -v u="$U" -v s="$S" 'BEGIN { printf "%.2f", u + s }')
}
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
alloc() { du -B1 "$1" | cut -f1; }
size() { stat -c %s "$1"; }
jq_num() { python3 -c "import json,sys; print(json.load(open('$WORK/last.out'))['$1'])"; }

new_vmvault() { rm -rf "$WORK/vv"; "$APPLIANCE" repo init --repo "$WORK/vv" >/dev/null; }
new_restic() { rm -rf "$WORK/rr"; "$RESTIC" -r "$WORK/rr" init >/dev/null 2>&1; }

# --- issue 15: three disk classes and the update on clones, one table ------
# BENCH_CLASSES (default "os vm random") picks the disk classes; the update
# on clones always runs. BENCH_OS_GIB sizes the OS image (default 4).
cpuratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
classes() {
	echo "### Disk classes and the update on clones, against restic $("$RESTIC" version | cut -d' ' -f2)"
	echo
	echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg). Ratios are restic / vmvault for time and CPU (above 1: vmvault faster or cheaper), vmvault / restic for stored bytes and RSS."
	echo
	echo "| disk | backup s (vmvault / restic) | **speed** | CPU s (vmvault / restic) | **CPU** | stored MB (vmvault / restic) | **stored** | RSS MiB (vmvault / restic) | restore s, median of 5 (vmvault / restic --sparse) | **restore** | restore CPU s, median (vmvault / restic) | **restore CPU** |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for class in "os:OS binaries (/usr/lib/x86_64-linux-gnu)" "vm:text and documents" "random:dense random 1 GiB"; do
		local f=${class%%:*} name=${class#*:}
		case " ${BENCH_CLASSES:-os vm random} " in *" $f "*) ;; *) continue ;; esac
		# A throwaway backup by each tool first: the first backup after the
		# image was written ran restic at half speed (PERFORMANCE.md §13b,
		# 2026-12-04); the measured one is the second, page cache warm and clean.
		new_vmvault; new_restic; sync
		"$APPLIANCE" image backup --repo "$WORK/vv" --vm "$f" --json "$IMG/$f.img" >/dev/null
		"$RESTIC" -r "$WORK/rr" backup -q "$IMG/$f.img" >/dev/null
		new_vmvault; new_restic; sync
		timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm "$f" --json "$IMG/$f.img"
		local vs=$SECS vc=$CPU vr=$RSS_MB id; id=$(jq_num restorePoint)
		sync
		timed "$RESTIC" -r "$WORK/rr" backup -q "$IMG/$f.img"
		local rs=$SECS rc=$CPU rr=$RSS_MB
		local vb rb; vb=$(du -sb "$WORK/vv" | cut -f1); rb=$(du -sb "$WORK/rr" | cut -f1)
		# Restores alternate, five each, after a sync so that the write-back
		# of one does not land on the next; the medians are compared (the
		# kernel's share of a restore, page-cache writes, varies by 2x from
		# one run to the next on a shared VM: three were not enough).
		local vxs=() rxs=() vcs=() rcs=() k
		for k in 1 2 3 4 5; do
			rm -rf "$WORK/out.img" "$WORK/rrest"; sync
			timed "$APPLIANCE" image restore --repo "$WORK/vv" --restore-point "$id" "$WORK/out.img"; vxs+=("$SECS"); vcs+=("$CPU")
			[ "$k" = 1 ] && { cmp "$WORK/out.img" "$IMG/$f.img" || { echo "vmvault restore of $f differs" >&2; exit 1; }; }
			rm -f "$WORK/out.img"; sync
			timed "$RESTIC" -r "$WORK/rr" restore latest --path "$IMG/$f.img" --sparse --target "$WORK/rrest"; rxs+=("$SECS"); rcs+=("$CPU")
		done
		rm -rf "$WORK/rrest"
		local vx rx vxc rxc
		vx=$(printf '%s\n' "${vxs[@]}" | sort -n | sed -n 3p); rx=$(printf '%s\n' "${rxs[@]}" | sort -n | sed -n 3p)
		vxc=$(printf '%s\n' "${vcs[@]}" | sort -n | sed -n 3p); rxc=$(printf '%s\n' "${rcs[@]}" | sort -n | sed -n 3p)
		echo "| $name, $(( $(alloc "$IMG/$f.img") / 1048576 )) MiB allocated | $vs / $rs | $(ratio "$rs" "$vs")x | $vc / $rc | $(cpuratio "$rc" "$vc")x | $(mb "$vb") / $(mb "$rb") | $(ratio "$vb" "$rb")x | $vr / $rr | $vx / $rx | $(ratio "$rx" "$vx")x | $vxc / $rxc | $(cpuratio "$rxc" "$vxc")x |"
	done
	# The same update (~30 MB of new libraries) on four clones of vm.img;
	# each clone wrote a log of another size first, so its allocator puts the
	# update elsewhere. vmvault: full backup of each clone, then a CBT
	# incremental (the changed 4 KiB blocks); restic: both images whole.
	new_vmvault; new_restic
	local cmds="$WORK/clone.cmds" i vstored=() rstored=() vsecs=() reads=() vcpus=() vrss=() rsecs=() rcpus=() rrss=()
	for i in 1 2 3 4; do
		local c="$IMG/clone$i.img" before
		cp --sparse=always "$IMG/vm.img" "$c"
		head -c $((4096 * (1 + 3 * i) + 100)) /dev/urandom > "$WORK/boot.log"
		{ echo "mkdir var"; echo "write $WORK/boot.log var/boot.log"; } > "$cmds"
		debugfs -w -f "$cmds" "$c" >/dev/null 2>&1
		"$APPLIANCE" image backup --repo "$WORK/vv" --vm "clone$i" --json "$c" > "$WORK/last.out"
		local pid; pid=$(jq_num restorePoint)
		"$RESTIC" -r "$WORK/rr" backup -q "$c" >/dev/null
		cp --sparse=always "$c" "$c.before"
		{ echo "mkdir opt"; for f in "$IMG"/update/*; do echo "write $f opt/$(basename "$f")"; done; } > "$cmds"
		debugfs -w -f "$cmds" "$c" >/dev/null 2>&1
		"$WORK/bin/diffblocks" "$c.before" "$c" > "$WORK/changed$i.json"
		rm -f "$c.before"
		local vb0 rb0; vb0=$(du -sb "$WORK/vv" | cut -f1); rb0=$(du -sb "$WORK/rr" | cut -f1)
		timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm "clone$i" --json --parent "$pid" --changed "$WORK/changed$i.json" "$c"
		vsecs+=("$SECS"); vcpus+=("$CPU"); vrss+=("$RSS_MB"); reads+=("$(jq_num bytesRead)")
		timed "$RESTIC" -r "$WORK/rr" backup -q "$c"
		rsecs+=("$SECS"); rcpus+=("$CPU"); rrss+=("$RSS_MB")
		vstored+=($(( $(du -sb "$WORK/vv" | cut -f1) - vb0 ))); rstored+=($(( $(du -sb "$WORK/rr" | cut -f1) - rb0 )))
		rm -f "$c"
	done
	local v2=$(( vstored[1] + vstored[2] + vstored[3] )) r2=$(( rstored[1] + rstored[2] + rstored[3] ))
	sum3() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f", a + b + c }'; }
	local vs2 rs2 vc2 rc2
	vs2=$(sum3 "${vsecs[1]}" "${vsecs[2]}" "${vsecs[3]}"); rs2=$(sum3 "${rsecs[1]}" "${rsecs[2]}" "${rsecs[3]}")
	vc2=$(sum3 "${vcpus[1]}" "${vcpus[2]}" "${vcpus[3]}"); rc2=$(sum3 "${rcpus[1]}" "${rcpus[2]}" "${rcpus[3]}")
	echo "| update on clones, VM 1 (CBT incremental; restic reads the image; stored target ≤ 1.05x) | ${vsecs[0]} / ${rsecs[0]} | $(ratio "${rsecs[0]}" "${vsecs[0]}")x | ${vcpus[0]} / ${rcpus[0]} | $(cpuratio "${rcpus[0]}" "${vcpus[0]}")x | $(mb ${vstored[0]}) / $(mb ${rstored[0]}) | $(ratio ${vstored[0]} ${rstored[0]})x | ${vrss[0]} / ${rrss[0]} | | |"
	echo "| update on clones, VMs 2–4 together (stored target ≤ 1.5x) | $vs2 / $rs2 | $(ratio "$rs2" "$vs2")x | $vc2 / $rc2 | $(cpuratio "$rc2" "$vc2")x | $(mb $v2) / $(mb $r2) | $(ratio $v2 $r2)x | ${vrss[1]} / ${rrss[1]} | | |"
	echo
	echo "Update on four clones of vm.img: $(du -sb "$IMG/update" | cut -f1) bytes of new files each; the CBT incrementals read ${reads[*]} bytes; stored MB per clone vmvault $(mb ${vstored[0]}) $(mb ${vstored[1]}) $(mb ${vstored[2]}) $(mb ${vstored[3]}), restic $(mb ${rstored[0]}) $(mb ${rstored[1]}) $(mb ${rstored[2]}) $(mb ${rstored[3]})."
	echo
	echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	rm -rf "$WORK/vv" "$WORK/rr"
}
if [ "${BENCH_ONLY:-}" = classes ]; then
	classes
	exit 0
fi

echo "## End-to-end: appliance image backup/restore vs restic 0.18.0"
echo
echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(go version | cut -d' ' -f3); data in page cache (warm)."
echo "Command: \`make bench\` (scripts/bench.sh). Images: vm.img 4 GiB ext4 with $(( $(alloc "$IMG/vm.img") / 1048576 )) MiB allocated."
echo
echo "| measurement | vmvault | restic | ratio |"
echo "|---|---|---|---|"

# Full backup of the sparse VM image.
new_vmvault; new_restic
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json "$IMG/vm.img"; V_FULL=$SECS; V_FULL_RSS=$RSS_MB
V_ID=$(jq_num restorePoint); V_FULL_IN=$(jq_num seconds)
timed "$RESTIC" -r "$WORK/rr" backup -q "$IMG/vm.img"; R_FULL=$SECS
echo "| full backup, 4 GiB sparse VM image (s) | $V_FULL ($(mbps $(size "$IMG/vm.img") $V_FULL) MB/s logical, ${V_FULL_RSS} MiB RSS; backup proper $(printf %.2f $V_FULL_IN) s) | $R_FULL | $(ratio $R_FULL $V_FULL)x faster |"

timed "$APPLIANCE" repo list --repo "$WORK/vv"; echo "| open an encrypted repository (Argon2id 32 MiB, t=2), part of every command (s) | $SECS | | |"

# Second backup of the unchanged image.
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json "$IMG/vm.img"; V_SECOND=$SECS
timed "$RESTIC" -r "$WORK/rr" backup -q "$IMG/vm.img"; R_SECOND=$SECS
echo "| second backup, unchanged (s) | $V_SECOND ($(ratio $V_FULL $V_SECOND)x faster than the first) | $R_SECOND | $(ratio $R_SECOND $V_SECOND)x faster |"
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json --force-read "$IMG/vm.img"; V_FORCED=$SECS
echo "| second backup, unchanged, --force-read (s) | $V_FORCED ($(ratio $V_FULL $V_FORCED)x faster than the first: re-read, re-hashed, nothing stored) | | |"

# Incremental with --changed after the in-place change.
CHANGED=$(python3 -c "import json; print(sum(e['length'] for e in json.load(open('$IMG/changed.json'))))")
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json --parent "$V_ID" --changed "$IMG/changed.json" "$IMG/vm2.img"; V_INC=$SECS
V_INC_READ=$(jq_num bytesRead); V_INC_STORED=$(jq_num storedBytesAdded); V_INC_IN=$(jq_num seconds)
timed "$RESTIC" -r "$WORK/rr" backup -q "$IMG/vm2.img"; R_INC=$SECS
echo "| incremental after ~50 MB guest change (s) | $V_INC (read $V_INC_READ of $CHANGED changed bytes; $(ratio $V_FULL $V_INC)x faster than full; backup proper $(printf %.2f $V_INC_IN) s, $(ratio $V_FULL_IN $V_INC_IN)x) | $R_INC (reads the whole image) | $(ratio $R_INC $V_INC)x faster |"

# Restore, sparse, both: the median of three runs each, after a sync, so the
# write-back of earlier runs does not land on one of them.
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
V_RUNS=(); R_RUNS=()
for i in 1 2 3; do
	rm -rf "$WORK/out.img" "$WORK/rrest"; sync
	timed "$APPLIANCE" image restore --repo "$WORK/vv" --restore-point "$V_ID" "$WORK/out.img"; V_RUNS+=("$SECS"); V_RES_RSS=$RSS_MB
	[ "$i" = 1 ] && { cmp "$WORK/out.img" "$IMG/vm.img" || { echo "vmvault restore differs" >&2; exit 1; }; }
	rm -f "$WORK/out.img"; sync
	timed "$RESTIC" -r "$WORK/rr" restore latest --path "$IMG/vm.img" --sparse --target "$WORK/rrest"; R_RUNS+=("$SECS")
done
V_RES=$(median3 "${V_RUNS[@]}"); R_RES=$(median3 "${R_RUNS[@]}")
echo "| restore 4 GiB sparse image, median of 3 (s) | $V_RES ($(mbps $(size "$IMG/vm.img") $V_RES) MB/s, ${V_RES_RSS} MiB RSS; runs ${V_RUNS[*]}) | $R_RES (runs ${R_RUNS[*]}) | $(ratio $R_RES $V_RES)x faster |"
rm -rf "$WORK/rrest" "$WORK/out.img"

# Dense random data.
new_vmvault; new_restic
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm rnd --json "$IMG/random.img"; V_RND=$SECS; V_RND_RSS=$RSS_MB
timed "$RESTIC" -r "$WORK/rr" backup -q "$IMG/random.img"; R_RND=$SECS
echo "| full backup, 1 GiB random (s) | $V_RND ($(mbps 1073741824 $V_RND) MB/s, ${V_RND_RSS} MiB RSS) | $R_RND ($(mbps 1073741824 $R_RND) MB/s) | $(ratio $R_RND $V_RND)x faster |"

# Stored bytes for the three VM images together. Both tools pick a random
# chunker polynomial, which moves chunk boundaries and so compression by
# +-2% from run to run; vmvault takes restic's polynomial here (like restic's
# --copy-chunker-params) so that both cut the same chunks and only the
# storage format and compression differ.
new_restic
POL=$("$RESTIC" -r "$WORK/rr" cat config | python3 -c "import json,sys; print(json.load(sys.stdin)['chunker_polynomial'])")
rm -rf "$WORK/vv"; "$APPLIANCE" repo init --repo "$WORK/vv" --chunker-polynomial "$POL" >/dev/null
for f in vm.img vm2.img clone.img; do
	"$APPLIANCE" image backup --repo "$WORK/vv" --vm "$f" "$IMG/$f" >/dev/null
	"$RESTIC" -r "$WORK/rr" backup -q "$IMG/$f" >/dev/null
done
V_STORE=$(du -sb "$WORK/vv" | cut -f1); R_STORE=$(du -sb "$WORK/rr" | cut -f1)
echo "| stored bytes, vm + vm2 + clone, same chunker polynomial (MB) | $(awk -v b=$V_STORE 'BEGIN{printf "%.1f", b/1e6}') | $(awk -v b=$R_STORE 'BEGIN{printf "%.1f", b/1e6}') | $(ratio $R_STORE $V_STORE)x smaller |"

# Peak memory on a 64 GiB sparse image with 4 GiB of data.
new_vmvault
timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm big --json "$IMG/big.img"; V_BIG=$SECS; V_BIG_RSS=$RSS_MB
echo "| 64 GiB sparse image with 4 GiB data: backup (s, peak RSS) | $V_BIG s, ${V_BIG_RSS} MiB | | |"
BIG_ID=$(jq_num restorePoint)
rm -f "$WORK/big.out"
timed "$APPLIANCE" image restore --repo "$WORK/vv" --restore-point "$BIG_ID" "$WORK/big.out"; echo "| 64 GiB sparse image: restore (s, peak RSS) | $SECS s, ${RSS_MB} MiB | | |"
rm -f "$WORK/big.out"
echo

# Storage amplification of the incremental for several chunkers.
echo "### Incremental storage amplification (stored bytes added / changed bytes = $CHANGED)"
echo
echo "| chunker | full backup (s) | incremental (s) | bytes read | stored added | amplification |"
echo "|---|---|---|---|---|---|"
for spec in "cdc 262144" "cdc 1048576" "cdc 4194304" "fixed 65536" "fixed 1048576" "fixed 4194304"; do
	set -- $spec
	rm -rf "$WORK/vv"
	"$APPLIANCE" repo init --repo "$WORK/vv" --chunker "$1" --chunk-size "$2" >/dev/null
	timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json "$IMG/vm.img"; F=$SECS; ID=$(jq_num restorePoint)
	timed "$APPLIANCE" image backup --repo "$WORK/vv" --vm vm --json --parent "$ID" --changed "$IMG/changed.json" "$IMG/vm2.img"
	echo "| $1 $(( $2 / 1024 )) KiB | $F | $SECS | $(jq_num bytesRead) | $(jq_num storedBytesAdded) | $(ratio $(jq_num storedBytesAdded) $CHANGED) |"
done
rm -rf "$WORK/vv" "$WORK/rr"
echo
classes
