# gpulayer probe: prints, in delimited sections, everything a plan needs to
# know about this machine. reconcile/facts.Parse reads the output and
# docs/facts.md describes it.
#
# Run as: sh -s -- NONCE [PID[:NODE]...] < probe.sh
#
# Every section is framed by lines that carry NONCE, a random token chosen by
# the caller for this run, so text a command prints cannot end a section early:
#   ==gpulayer:NONCE:begin:NAME
#   ...the command's standard output, verbatim...
#   (a newline added by the frame)
#   ==gpulayer:NONCE:end:NAME:EXIT_STATUS
# and the output ends with ==gpulayer:NONCE:done.
#
# The script is read from standard input, so every command must get its input
# elsewhere, or it would swallow the rest of the script. Everything below is
# function definitions until the last line, which runs them with stdin from
# /dev/null: by then the shell has read the whole script.
#
# Forks are kept few (builtins read files), because a probe of 500 machines
# pays for each one 500 times. Slow commands run under `timeout`: closing an
# SSH session without a terminal does not stop the remote command.

gpulayer_begin() {
	printf '==gpulayer:%s:begin:%s\n' "$gpulayer_nonce" "$1"
}

gpulayer_end() {
	printf '\n==gpulayer:%s:end:%s:%s\n' "$gpulayer_nonce" "$1" "$2"
}

# gpulayer_section NAME COMMAND [ARG...] runs COMMAND inside a section.
gpulayer_section() {
	gpulayer_name=$1
	shift
	gpulayer_begin "$gpulayer_name"
	"$@"
	gpulayer_end "$gpulayer_name" "$?"
}

# gpulayer_cat FILE prints FILE with shell builtins only (no fork).
gpulayer_cat() {
	[ -r "$1" ] || return 1
	while IFS= read -r gpulayer_line || [ -n "$gpulayer_line" ]; do
		printf '%s\n' "$gpulayer_line"
	done <"$1"
}

# gpulayer_bounded SECONDS COMMAND [ARG...] runs COMMAND under timeout(1) when
# the machine has it.
gpulayer_bounded() {
	if [ -n "$gpulayer_timeout" ]; then
		timeout "$@"
	else
		shift
		"$@"
	fi
}

# gpulayer_uname prints what `uname -s -r -m` does, from /proc when it can.
gpulayer_uname() {
	if [ -r /proc/sys/kernel/ostype ] && [ -r /proc/sys/kernel/osrelease ] &&
		[ -r /proc/sys/kernel/arch ] &&
		IFS= read -r gpulayer_s </proc/sys/kernel/ostype &&
		IFS= read -r gpulayer_r </proc/sys/kernel/osrelease &&
		IFS= read -r gpulayer_m </proc/sys/kernel/arch; then
		printf '%s %s %s\n' "$gpulayer_s" "$gpulayer_r" "$gpulayer_m"
		return 0
	fi
	uname -s -r -m
}

# gpulayer_fetch HEADER URL prints what the instance metadata service
# answers at URL to a request with HEADER, within 1 s (a few more under
# timeout(1), should the client hang). Never through a proxy: the service
# is the link-local address of the machine's own cloud.
gpulayer_fetch() {
	if command -v curl >/dev/null 2>&1; then
		gpulayer_bounded 3 curl -fsS -m 1 --noproxy '*' -H "$1" "$2"
	elif command -v wget >/dev/null 2>&1; then
		gpulayer_bounded 3 wget -q -T 1 -t 1 --header="$1" -O - "$2"
	else
		return 127
	fi
}

gpulayer_gce_zone() {
	gpulayer_fetch 'Metadata-Flavor: Google' "$gpulayer_md/computeMetadata/v1/instance/zone"
}

# gpulayer_ec2_location prints the availability zone and the region, a
# line each, from the EC2 instance metadata service, IMDSv2: a session
# token first (PUT), then each value asked with it; each request 1 s at
# most. A token that does not look like one (status 2) is never sent.
# wget only where it knows --method (GNU's); busybox's cannot PUT.
gpulayer_ec2_location() {
	gpulayer_md_url="$gpulayer_md/latest/api/token"
	if command -v curl >/dev/null 2>&1; then
		gpulayer_token=$(gpulayer_bounded 3 curl -fsS -m 1 --noproxy '*' -X PUT \
			-H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$gpulayer_md_url") || return
	elif command -v wget >/dev/null 2>&1; then
		gpulayer_token=$(gpulayer_bounded 3 wget -q -T 1 -t 1 --method=PUT \
			--header='X-aws-ec2-metadata-token-ttl-seconds: 21600' -O - "$gpulayer_md_url") || return
	else
		return 127
	fi
	case $gpulayer_token in
	'' | *[!A-Za-z0-9+/=_-]*) return 2 ;;
	esac
	[ "${#gpulayer_token}" -le 512 ] || return 2
	gpulayer_md_header="X-aws-ec2-metadata-token: $gpulayer_token"
	gpulayer_md_zone=$(gpulayer_fetch "$gpulayer_md_header" "$gpulayer_md/latest/meta-data/placement/availability-zone") || return
	gpulayer_md_region=$(gpulayer_fetch "$gpulayer_md_header" "$gpulayer_md/latest/meta-data/placement/region") || return
	printf '%s\n%s\n' "$gpulayer_md_zone" "$gpulayer_md_region"
}

# gpulayer_azure_location prints the Azure instance metadata service's
# compute document (JSON: location, zone and the rest), which the parser
# reads.
gpulayer_azure_location() {
	gpulayer_fetch 'Metadata: true' "$gpulayer_md/metadata/instance/compute?api-version=2021-02-01"
}

# gpulayer_dmi NAME sets gpulayer_v to the first line of the machine's DMI
# field NAME, empty when it has none.
gpulayer_dmi() {
	gpulayer_v=
	if [ -r "$gpulayer_dmi_dir/$1" ]; then
		IFS= read -r gpulayer_v <"$gpulayer_dmi_dir/$1" || :
	fi
}

# gpulayer_location asks the metadata service of the cloud the machine's
# DMI names, and no other: Google Compute Engine by its product name, EC2
# by its system vendor (Nitro), or on Xen by its BIOS version or board
# vendor, Azure by its system vendor and the chassis asset tag Azure gives
# every VM (a Hyper-V VM elsewhere has the vendor, not the tag). Elsewhere
# nothing is asked, so no machine waits on a timeout; without DMI (a
# container, the sandbox) nothing more is read.
gpulayer_location() {
	case $gpulayer_product in
	*'Google Compute Engine'*)
		gpulayer_section gce_zone gpulayer_gce_zone
		return
		;;
	esac
	[ -d "$gpulayer_dmi_dir" ] || return 0
	gpulayer_dmi sys_vendor
	case $gpulayer_v in
	'Amazon EC2'*)
		gpulayer_section ec2_location gpulayer_ec2_location
		;;
	'Microsoft Corporation')
		gpulayer_dmi chassis_asset_tag
		if [ "$gpulayer_v" = 7783-7084-3265-9085-8269-3286-77 ]; then
			gpulayer_section azure_location gpulayer_azure_location
		fi
		;;
	Xen | '')
		gpulayer_dmi bios_version
		gpulayer_b=$gpulayer_v
		gpulayer_dmi board_vendor
		case $gpulayer_b:$gpulayer_v in
		*amazon*:* | *:'Amazon EC2'*) gpulayer_section ec2_location gpulayer_ec2_location ;;
		esac
		;;
	esac
}

gpulayer_torch() {
	command -v python3 >/dev/null 2>&1 || return 127
	# importlib.metadata reads the installed version without importing torch,
	# which takes seconds and initialises CUDA.
	gpulayer_bounded 20 python3 -c 'import sys
try:
    from importlib.metadata import version, PackageNotFoundError
except ImportError:
    import torch
    print(torch.__version__)
    sys.exit(0)
try:
    print(version("torch"))
except PackageNotFoundError:
    sys.exit(3)'
}

# gpulayer_pids PID[:NODE]... prints, for each process the caller asks
# about, "PID STAT" (its /proc/PID/stat line) while it runs, and
# "PID - STATUS [FILE...]" once it has ended (a zombie has too): the exit
# status its launch recorded in ~/.gpulayer/runs/NODE.exit, or ? when there
# is none, then the node's files (exit, log) that are there but are not
# regular files. NODE (JOB/RUN/node-N) names the node's files; the logs of
# those gone are printed afterwards (gpulayer_logs).
#
# Run files are only read when they are regular files, a few bytes at a
# time and under timeout: a FIFO would block the read, a device or a file
# without a newline would never end it, and either would hold the whole
# probe until gpulayer gives up on the host. The forks this costs are paid
# only for processes that have ended.
gpulayer_pids() {
	gpulayer_logs=
	gpulayer_stalls=
	for gpulayer_arg in "$@"; do
		gpulayer_stall=
		case $gpulayer_arg in
		*:s)
			gpulayer_stall=1
			gpulayer_arg=${gpulayer_arg%:s}
			;;
		esac
		gpulayer_pid=${gpulayer_arg%%:*}
		gpulayer_node=
		case $gpulayer_arg in
		*:*) gpulayer_node=${gpulayer_arg#*:} ;;
		esac
		case $gpulayer_pid in
		'' | *[!0-9]*) continue ;;
		esac
		case $gpulayer_node in
		*..* | /* | *[!A-Za-z0-9._/-]*) gpulayer_node= ;;
		esac
		gpulayer_stat=
		if [ -r "/proc/$gpulayer_pid/stat" ] &&
			IFS= read -r gpulayer_stat <"/proc/$gpulayer_pid/stat"; then
			# A zombie has ended: where nothing reaps orphans (a container
			# whose init does not), it is its exit status that matters.
			case ${gpulayer_stat##*\) } in
			Z* | X*) ;;
			*)
				printf '%s %s\n' "$gpulayer_pid" "$gpulayer_stat"
				if [ -n "$gpulayer_stall" ] && [ -n "$gpulayer_node" ]; then
					gpulayer_stalls="$gpulayer_stalls $gpulayer_pid:$gpulayer_node"
				fi
				continue
				;;
			esac
		fi
		gpulayer_status=
		gpulayer_unread=
		if [ -n "$gpulayer_node" ]; then
			gpulayer_f="$HOME/.gpulayer/runs/$gpulayer_node"
			if [ -f "$gpulayer_f.exit" ]; then
				# An exit file holds a status and a newline: 32 bytes
				# are plenty, and never all of a runaway file.
				{ gpulayer_status=$(gpulayer_bounded 2 head -c 32 "$gpulayer_f.exit" 2>/dev/null); } 2>/dev/null
				# How long ago it was written, on the machine's clock: when
				# the node ended.
				if gpulayer_m=$(date -r "$gpulayer_f.exit" +%s 2>/dev/null) && gpulayer_n=$(date +%s 2>/dev/null); then
					gpulayer_unread=" age=$((gpulayer_n - gpulayer_m))"
				fi
			elif [ -e "$gpulayer_f.exit" ]; then
				gpulayer_unread=' exit'
			fi
			if [ -f "$gpulayer_f.log" ]; then
				gpulayer_logs="$gpulayer_logs $gpulayer_pid:$gpulayer_node"
			elif [ -e "$gpulayer_f.log" ]; then
				gpulayer_unread="$gpulayer_unread log"
			fi
		fi
		case $gpulayer_status in
		[0-9] | [0-9][0-9] | [0-9][0-9][0-9]) ;;
		*) gpulayer_status='?' ;;
		esac
		printf '%s - %s%s\n' "$gpulayer_pid" "$gpulayer_status" "$gpulayer_unread"
	done
}

# gpulayer_activity prints, for each running process whose job has a
# stall_timeout (gpulayer_pids collects them), "PID LOG_AGE HEARTBEAT_AGE":
# the seconds since its node's log and heartbeat file last changed, on the
# machine's own clock, - for a file that is not there. It forks (date -r),
# so only those processes are asked about.
gpulayer_activity() {
	[ -n "$gpulayer_stalls" ] || return 0
	gpulayer_now=$(date +%s) || return 1
	for gpulayer_arg in $gpulayer_stalls; do
		gpulayer_f="$HOME/.gpulayer/runs/${gpulayer_arg#*:}"
		gpulayer_ages=
		for gpulayer_x in log heartbeat; do
			gpulayer_age=-
			if [ -f "$gpulayer_f.$gpulayer_x" ]; then
				gpulayer_m=$(date -r "$gpulayer_f.$gpulayer_x" +%s 2>/dev/null) &&
					gpulayer_age=$((gpulayer_now - gpulayer_m))
			fi
			gpulayer_ages="$gpulayer_ages $gpulayer_age"
		done
		printf '%s%s\n' "${gpulayer_arg%%:*}" "$gpulayer_ages"
	done
}

# gpulayer_logs prints a section log.PID with the end (16 KiB at most) of
# the log of each process gpulayer_pids found gone whose log is a regular
# file; tail runs under timeout, in case the log was since replaced.
gpulayer_logs() {
	for gpulayer_arg in $gpulayer_logs; do
		gpulayer_f="$HOME/.gpulayer/runs/${gpulayer_arg#*:}.log"
		if [ ! -f "$gpulayer_f" ] || [ ! -r "$gpulayer_f" ]; then
			continue
		fi
		gpulayer_section "log.${gpulayer_arg%%:*}" gpulayer_bounded 5 tail -c 16384 "$gpulayer_f"
	done
}

# gpulayer_run_ids prints "PID RUN_ID" for each process in
# $gpulayer_apps (the GPUs' compute processes): the GPULAYER_RUN_ID in its
# environment, or - when it has none or the environment cannot be read
# (another user's process), or "gone" when it has no /proc entry (it
# ended since nvidia-smi listed it, or lives in another pid namespace:
# gpulayer_recheck tells the two apart). It sets gpulayer_gone when one
# was.
gpulayer_run_ids() {
	gpulayer_seen=
	gpulayer_gone=
	gpulayer_nl='
'
	# An idle machine's: nothing to read, and no here-document to make.
	[ -n "$gpulayer_apps" ] || return 0
	while IFS=', ' read -r _ gpulayer_p _; do
		case $gpulayer_p in
		'' | *[!0-9]*) continue ;;
		esac
		case " $gpulayer_seen " in
		*" $gpulayer_p "*) continue ;;
		esac
		gpulayer_seen="$gpulayer_seen $gpulayer_p"
		gpulayer_r=
		if [ -r "/proc/$gpulayer_p/environ" ]; then
			# One process (tr), not a pipeline of two: the variable is then
			# found with builtins. Each variable becomes one line (a newline
			# inside a value becomes \001 first), so no other variable's
			# value can pass for it.
			gpulayer_e=$(tr '\012\000' '\001\012' <"/proc/$gpulayer_p/environ" 2>/dev/null)
			case $gpulayer_nl$gpulayer_e in
			*"$gpulayer_nl"GPULAYER_RUN_ID=*)
				gpulayer_r=$gpulayer_nl$gpulayer_e
				gpulayer_r=${gpulayer_r#*"$gpulayer_nl"GPULAYER_RUN_ID=}
				gpulayer_r=${gpulayer_r%%"$gpulayer_nl"*}
				;;
			esac
		fi
		# Looked at after the read: a process that ended while it was
		# read left nothing to read.
		if [ -z "$gpulayer_r" ] && [ ! -e "/proc/$gpulayer_p" ]; then
			gpulayer_r=gone
			gpulayer_gone=1
		fi
		printf '%s %s\n' "$gpulayer_p" "${gpulayer_r:--}"
	done <<gpulayer_end_of_apps
$gpulayer_apps
gpulayer_end_of_apps
}

# gpulayer_apps_query prints nvidia-smi's compute processes.
gpulayer_apps_query() {
	gpulayer_bounded 20 nvidia-smi \
		--query-compute-apps=gpu_uuid,pid,used_memory \
		--format=csv,noheader,nounits
}

# gpulayer_claims prints, for each GPU claim file a gpulayer launch wrote
# in ~/.gpulayer/claims (one per GPU: "v1 LINEAGE JOB RUN RANK PID START"),
# "NAME LINEAGE JOB RUN RANK PID LIVE": LIVE is 1 while the claim's
# process runs with its start time, else 0 (a stale claim, taken over by
# the next launch). Builtins only; regular files only.
gpulayer_claims() {
	gpulayer_d="$HOME/.gpulayer/claims"
	[ -d "$gpulayer_d" ] || return 0
	for gpulayer_f in "$gpulayer_d"/*; do
		[ -f "$gpulayer_f" ] || continue
		gpulayer_line=
		IFS= read -r gpulayer_line <"$gpulayer_f" || :
		# shellcheck disable=SC2086
		set -- $gpulayer_line
		if [ "$1" != v1 ] || [ $# -ne 7 ]; then
			continue
		fi
		gpulayer_live=0
		case $6 in
		'' | *[!0-9]*) ;;
		*)
			if IFS= read -r gpulayer_stat <"/proc/$6/stat" 2>/dev/null; then
				gpulayer_stat=${gpulayer_stat##*\) }
				gpulayer_c7=$7
				# shellcheck disable=SC2086
				set -- $gpulayer_stat
				case $1 in
				Z* | X*) ;;
				*)
					shift 19
					[ "$1" = "$gpulayer_c7" ] && gpulayer_live=1
					;;
				esac
				# shellcheck disable=SC2086
				set -- $gpulayer_line
			fi
			;;
		esac
		printf '%s %s %s %s %s %s %s\n' "${gpulayer_f##*/}" "$2" "$3" "$4" "$5" "$6" "$gpulayer_live"
	done
}

# gpulayer_fabric prints, of `nvidia-smi -q`, only the GPU lines and the
# Fabric sections below them: each GPU's NVLink fabric registration (state,
# status, clique id, cluster UUID), which places machines of one multi-node
# NVLink domain together. The rest, a few hundred lines per GPU, is dropped
# here with builtins, so a probe stays small and forks nothing more. The
# output is split into lines by the shell's field splitting (IFS a
# newline, no globbing), not read line by line: `read` takes a byte per
# system call, and a whole -q output is tens of kilobytes. Empty lines,
# which splitting drops, are never kept anyway. The most common lines (the
# details below a heading, 8 spaces in) are tested first. Output with no
# Fabric section at all (older drivers, PCIe GPUs) prints nothing: its GPU
# lines alone say nothing of a fabric.
gpulayer_fabric() {
	gpulayer_q=$(gpulayer_bounded 20 nvidia-smi -q)
	gpulayer_s=$?
	case $gpulayer_q in
	*'    Fabric'*) ;;
	*) return "$gpulayer_s" ;;
	esac
	gpulayer_in=
	gpulayer_ifs=$IFS
	IFS='
'
	set -f
	for gpulayer_line in $gpulayer_q; do
		case $gpulayer_line in
		'        '*) [ -z "$gpulayer_in" ] || printf '%s\n' "$gpulayer_line" ;;
		'GPU '*)
			gpulayer_in=
			printf '%s\n' "$gpulayer_line"
			;;
		'    Fabric'*)
			gpulayer_in=1
			printf '%s\n' "$gpulayer_line"
			;;
		*) gpulayer_in= ;;
		esac
	done
	set +f
	IFS=$gpulayer_ifs
	return "$gpulayer_s"
}

gpulayer_probe() {
	gpulayer_nonce=$1
	shift
	gpulayer_timeout=
	if command -v timeout >/dev/null 2>&1; then
		gpulayer_timeout=1
	fi

	if [ -r /proc/sys/kernel/hostname ]; then
		gpulayer_section hostname gpulayer_cat /proc/sys/kernel/hostname
	else
		gpulayer_section hostname uname -n
	fi
	gpulayer_section uname gpulayer_uname

	# GPULAYER_TEST_DMI_DIR and GPULAYER_TEST_METADATA_URL are for
	# gpulayer's own tests only (a fake machine's DMI, a fake metadata
	# service on loopback); docs/facts.md says so. A machine that sets them
	# only changes its own claims, which rank below a provider's record.
	gpulayer_dmi_dir=${GPULAYER_TEST_DMI_DIR:-/sys/class/dmi/id}
	gpulayer_md=${GPULAYER_TEST_METADATA_URL:-http://169.254.169.254}
	gpulayer_dmi product_name
	gpulayer_product=$gpulayer_v
	gpulayer_section product_name printf '%s\n' "$gpulayer_product"
	gpulayer_location

	gpulayer_section torch gpulayer_torch
	# Where torchrun is on this PATH (the one a launch has): a builtin, no
	# fork.
	gpulayer_section torchrun command -v torchrun

	if command -v nvidia-smi >/dev/null 2>&1; then
		gpulayer_section gpus gpulayer_bounded 20 nvidia-smi \
			--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,driver_version \
			--format=csv,noheader,nounits
		gpulayer_apps=$(gpulayer_apps_query)
		gpulayer_apps_status=$?
		gpulayer_begin compute_apps
		[ -z "$gpulayer_apps" ] || printf '%s\n' "$gpulayer_apps"
		gpulayer_end compute_apps "$gpulayer_apps_status"
		gpulayer_section run_ids gpulayer_run_ids
		# A process gone from /proc is asked about once more: one that
		# ended is gone from nvidia-smi's list too, and holds no GPU; one
		# of another pid namespace (a container's neighbour) is still
		# listed, and still holds its GPU.
		[ -z "$gpulayer_gone" ] || gpulayer_section compute_apps_recheck gpulayer_apps_query
		gpulayer_section topo gpulayer_bounded 20 nvidia-smi topo -m
		gpulayer_section fabric gpulayer_fabric
		gpulayer_section claims gpulayer_claims
	else
		gpulayer_begin gpus
		gpulayer_end gpus 127
	fi

	gpulayer_section pids gpulayer_pids "$@"
	gpulayer_logs
	[ -z "$gpulayer_stalls" ] || gpulayer_section activity gpulayer_activity
	gpulayer_section boot_id gpulayer_cat /proc/sys/kernel/random/boot_id
	printf '==gpulayer:%s:done\n' "$gpulayer_nonce"
}

gpulayer_probe "$@" </dev/null
