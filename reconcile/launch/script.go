package launch

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/ssh"
)

// Script is the sh script that starts node n, detached: in a session of
// its own (setsid), standard input from /dev/null, standard output and
// error to the node's log, in the job's workdir, with the node's
// environment. Before starting anything it checks what would make the
// start fail (the workdir, the program, setsid), so a node that cannot
// start says why instead of leaving a process that dies at once.
//
// The process started is a small sh that runs the command in the
// foreground and writes its exit status next to the log when it ends; it
// is the session's and the process group's leader, so its pid is the
// group's id. Its start time (field 22 of /proc/PID/stat) and the boot id
// are printed with the pid, so a later pid that reuses the number is never
// taken for it.
//
// Once the node has started the script prints
//
//	gpulayer-launch:ok PID START_TIME BOOT_ID MASTER_PORT PID_NAMESPACE
//
// (gpulayer-launch:ended PID MASTER_PORT when the process had already
// ended and gone), and then watches it for the node's StartCheck and
// prints a check's report (see CheckScript): its last lines. When the
// node cannot start, the last line is
//
//	gpulayer-launch:error KIND MESSAGE
func Script(n Node) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# gpulayer launch: job %s, run %s, node %d\n", n.Job, n.RunID, n.Rank)
	w("umask 077\n")
	w("gpulayer_fail() { printf 'gpulayer-launch:error %%s %%s\\n' \"$1\" \"$2\"; exit 1; }\n")
	w("[ -n \"$HOME\" ] && [ -d \"$HOME\" ] || gpulayer_fail home 'the login has no home directory'\n")
	w("cd \"$HOME\" || gpulayer_fail home 'cannot enter the home directory'\n")
	w("gpulayer_dir=%s\n", ssh.Quote(RunsDir+"/"+n.Job+"/"+n.RunID))
	w("gpulayer_log=\"$HOME/$gpulayer_dir/node-%d.log\"\n", n.Rank)
	w("gpulayer_exit=\"$HOME/$gpulayer_dir/node-%d.exit\"\n", n.Rank)
	// What a launch of this node tried before left (forking rm only
	// then: on a machine starting many nodes, forks are what a launch
	// costs).
	w("if [ -e \"$gpulayer_exit\" ] || [ -L \"$gpulayer_exit\" ]; then rm -f \"$gpulayer_exit\"; fi\n")
	w("%s", workdirScript(n))
	argv, portAt := argvWithPort(n)
	w("command -v setsid >/dev/null 2>&1 || gpulayer_fail setsid 'setsid(1) is not installed (Debian and Ubuntu: util-linux)'\n")
	w("command -v %s >/dev/null 2>&1 || gpulayer_fail command_not_found %s\n", ssh.Quote(argv[0]),
		ssh.Quote("command not found: "+argv[0]))
	port := strconv.Itoa(n.MasterPort)
	if n.PickPort {
		w("%s", pickPortScript(n.MasterPort))
		port = "$gpulayer_port"
	} else {
		w("gpulayer_port=%d\n", n.MasterPort)
	}
	for _, v := range Env(n) {
		w("export %s=%s\n", v.Name, envValue(v))
	}
	w("export GPULAYER_EXIT_FILE=\"$gpulayer_exit\"\n")
	w("export GPULAYER_HEARTBEAT_FILE=\"$HOME/$gpulayer_dir/node-%d.heartbeat\"\n", n.Rank)
	// Where the machine has perl or python3, the leader becomes a child
	// subreaper (prctl PR_SET_CHILD_SUBREAPER, kept across the exec into
	// sh): whatever the command starts and orphans is re-parented to the
	// leader, not to init, so stop finds it in the leader's tree even
	// when it left the session and scrubbed its environment. Python's
	// locale coercion is turned off for that one exec (it would add
	// LC_CTYPE to the job's environment) unless the job sets it itself.
	leader := ssh.Quote(leaderScript) + " gpulayer-node " + quoteArgv(argv, portAt, port)
	var start strings.Builder
	sw := func(format string, args ...any) { fmt.Fprintf(&start, format, args...) }
	// perl first: it starts in a few milliseconds where python3 takes
	// tens (on 64 nodes of a busy machine, seconds of CPU); perl-base is
	// part of every Debian and Ubuntu install. It starts the session
	// itself (setsid(2)), so no setsid(1) is executed on its way.
	sw("if [ -n \"$gpulayer_perl\" ]; then\n")
	// PERL_BADLANG=0 keeps perl's warning about a locale the machine
	// lacks out of the log, and out of the job's environment.
	badlang, popBad := "PERL_BADLANG=0 ", popBadlang
	if _, own := n.Spec.Env["PERL_BADLANG"]; own {
		badlang, popBad = "", ""
	}
	// perl starts the leader and answers once it is ready (leaderPl),
	// making the run directory and the log, taking the claims' lock,
	// checking and writing the claims with no process of their own:
	// mkdir, flock, readlink and an mv per GPU fewer per node than the sh
	// below does it with, and no sleep while the leader starts its
	// session.
	//
	// PERL5OPT (the job's, or the machine's) would give the leader's perl
	// its switches: a -M of a module it lacks, -d, and the node never
	// starts, for a command that may not be perl at all. perl starts
	// without it and puts it back before the exec, so the command gets
	// it as it was: GPULAYER_PERL5OPT carries it, after an "x" that tells
	// a PERL5OPT set to nothing from none (popPerl5opt).
	sw("\tgpulayer_leader=$(GPULAYER_PERL5OPT=${PERL5OPT+x$PERL5OPT} PERL5OPT= %sperl -e %s \"$gpulayer_log\" \"$gpulayer_claims\" \"$gpulayer_gpus\" \"$gpulayer_lineage $gpulayer_job $gpulayer_run $gpulayer_rank\" sh -c %s </dev/null &)\n",
		badlang, ssh.Quote(leaderPl(popPerl5opt+popBad)), leader)
	sw("%s", perlStartedScript)
	mkdir := "\tmkdir -p \"$gpulayer_dir\" || gpulayer_fail rundir \"cannot create $HOME/$gpulayer_dir\"\n"
	sw("elif command -v python3 >/dev/null 2>&1; then\n")
	sw("%s", mkdir)
	if _, own := n.Spec.Env["PYTHONCOERCECLOCALE"]; own {
		sw("\tsetsid python3 -s -S -c %s sh -c %s </dev/null >\"$gpulayer_log\" 2>&1 9>&- &\n", ssh.Quote(subreaperPy+execRest), leader)
	} else {
		sw("\tPYTHONCOERCECLOCALE=0 setsid python3 -s -S -c %s sh -c %s </dev/null >\"$gpulayer_log\" 2>&1 9>&- &\n", ssh.Quote(subreaperPy+popCoerce+execRest), leader)
	}
	sw("\tgpulayer_pid=$!\n")
	sw("else\n")
	sw("%s", mkdir)
	sw("\tsetsid sh -c %s </dev/null >\"$gpulayer_log\" 2>&1 9>&- &\n", leader)
	sw("\tgpulayer_pid=$!\n")
	sw("fi\n")
	w("gpulayer_perl=\n")
	w("if command -v perl >/dev/null 2>&1; then gpulayer_perl=1; fi\n")
	if len(n.GPUs) == 0 {
		// A CPU-only node claims no GPU (and nothing from the job's
		// environment or the login's names claims for perl to write).
		w("gpulayer_claims= gpulayer_gpus=\n")
		w("%s", start.String())
	} else {
		// Its GPUs are claimed on the machine, all or none, before the
		// node starts, so that a launch of another configuration racing
		// for them fails instead of sharing them.
		w("[ -n \"$gpulayer_perl\" ] || command -v flock >/dev/null 2>&1 || gpulayer_fail flock 'flock(1) is not installed (Debian and Ubuntu: util-linux)'\n")
		w("[ -d \"$HOME\"/%s ] || mkdir -p \"$HOME\"/%s || gpulayer_fail claim %s\n", ssh.Quote(ClaimsDir), ssh.Quote(ClaimsDir), ssh.Quote("cannot create ~/"+ClaimsDir))
		w("gpulayer_lineage=%s gpulayer_job=%s gpulayer_run=%s gpulayer_rank=%d\n", ssh.Quote(orDash(n.Lineage)), ssh.Quote(n.Job), ssh.Quote(n.RunID), n.Rank)
		var gpus []string
		for i, g := range n.GPUs {
			uuid := ""
			if len(n.GPUUUIDs) == len(n.GPUs) {
				uuid = n.GPUUUIDs[i]
			}
			gpus = append(gpus, ClaimName(g, uuid), strconv.Itoa(g))
		}
		w("gpulayer_gpus=%s\n", ssh.Quote(strings.Join(gpus, " ")))
		w("%s", claimScript(start.String()))
	}
	// A command that ends at once can be gone, and reaped, before its
	// start is read: how it ended is then the start check's report.
	w("if ! IFS= read -r gpulayer_stat </proc/$gpulayer_pid/stat 2>/dev/null; then\n")
	w("\tprintf 'gpulayer-launch:ended %%s %%s\\n' \"$gpulayer_pid\" \"$gpulayer_port\"\n")
	w("\tgpulayer_alive=\n")
	w("%s", indent(boundedFunc+reportScript))
	w("fi\n")
	w("gpulayer_stat=${gpulayer_stat##*\\) }\n")
	w("set -- $gpulayer_stat\n")
	w("shift 19\n")
	w("gpulayer_start=$1\n")
	w("gpulayer_boot=\n")
	w("IFS= read -r gpulayer_boot </proc/sys/kernel/random/boot_id 2>/dev/null || :\n")
	// The pid namespace, with the boot id, tells machines that share one
	// kernel's processes: the sandbox's, containers of one host.
	// perl reported it with the leader's pid.
	w("if [ -z \"$gpulayer_perl\" ]; then\n")
	w("\tgpulayer_pidns=$(readlink /proc/self/ns/pid 2>/dev/null) || gpulayer_pidns=\n")
	w("\tcase $gpulayer_pidns in pid:\\[[0-9]*\\]) ;; *) gpulayer_pidns=- ;; esac\n")
	w("fi\n")
	w("printf 'gpulayer-launch:ok %%s %%s %%s %%s %%s\\n' \"$gpulayer_pid\" \"$gpulayer_start\" \"${gpulayer_boot:--}\" \"$gpulayer_port\" \"$gpulayer_pidns\"\n")
	w("%s", startCheckScript(n.StartCheck, true))
	return b.String()
}

// startCheckScript is the end of a launch script: it watches the node's
// leader ($gpulayer_pid, $gpulayer_start) from its start for wait, first
// 300 ms after it, then every half a second (the last look cut to what
// is left of wait), and prints a check's report (see CheckScript) as
// soon as it has seen the leader end, or once wait has passed with it
// running. Each interval is a sleep(1), a fork and an exec: on a machine
// starting many nodes they are what the check costs, so the default
// 300 ms takes one. Looks at 100 and 300 ms (two sleeps) or from 10 ms
// (four) caught nothing sooner that matters: a command that fails at
// once takes a tenth to a third of a second to start and fail on a busy
// machine (a missing one is refused before the start), and its failure
// is then reported at most 0.2 s later, on a path that goes on to stop
// the job. The launch's session thus carries its own confirmation: no
// second session per node, and no fixed wait before the first look.
//
// With session, a leader found running is waited for (up to a second)
// until it leads its own session: python3 and setsid(1) start it a few
// milliseconds after the launch has the leader's pid (perl answers only
// once it leads it), and a launch that reports at once (a start check of
// 0) must not end before its group exists, or a stop right after it
// would signal no group.
func startCheckScript(wait time.Duration, session bool) string {
	s := sleepMsFunc + boundedFunc + fmt.Sprintf(`gpulayer_wait_ms=%d
gpulayer_waited=0
gpulayer_step=300
while :; do
%s	if [ -z "$gpulayer_alive" ] || [ "$gpulayer_waited" -ge "$gpulayer_wait_ms" ]; then
		break
	fi
	[ "$gpulayer_step" -le $((gpulayer_wait_ms - gpulayer_waited)) ] || gpulayer_step=$((gpulayer_wait_ms - gpulayer_waited))
	gpulayer_sleep_ms "$gpulayer_step"
	gpulayer_waited=$((gpulayer_waited + gpulayer_step))
	gpulayer_step=500
done
`, wait.Milliseconds(), indent(aliveVarsScript))
	if session {
		s += `gpulayer_tries=0
while [ -n "$gpulayer_alive" ] && [ "$gpulayer_tries" -lt 100 ]; do
	IFS= read -r gpulayer_stat </proc/$gpulayer_pid/stat 2>/dev/null || break
	gpulayer_stat=${gpulayer_stat##*\) }
	# shellcheck disable=SC2086
	set -- $gpulayer_stat
	[ "$4" != "$gpulayer_pid" ] || break
	gpulayer_sleep_ms 10
	gpulayer_tries=$((gpulayer_tries + 1))
done
`
	}
	return s + reportScript
}

// leaderScript is the node's leader: a small sh that runs the command in
// the foreground and writes its exit status next to the log when it ends.
// It traps the signals stop sends so that it outlives the command and
// records how it ended; the command itself gets them with their default
// actions (a trapped signal is reset on exec). Once the command has ended,
// the processes it left behind (its orphans, re-parented to the leader
// where it is a subreaper) are stopped too: the node is over, and nothing
// of it may keep its GPUs: SIGTERM, up to 2 s, then SIGKILL. Whatever is
// at the exit file's name is removed before the status is written: a FIFO
// put there would block the write, and the leader with it, for ever.
const leaderScript = `trap : TERM INT HUP
"$@"
s=$?
rm -f "$GPULAYER_EXIT_FILE" 2>/dev/null
printf "%s\n" "$s" >"$GPULAYER_EXIT_FILE"
t=0
while [ "$t" -lt 25 ]; do
	c=
	IFS= read -r c </proc/$$/task/$$/children 2>/dev/null || :
	l=
	for p in $c; do
		IFS= read -r x </proc/$p/stat 2>/dev/null || continue
		case ${x##*\) } in Z* | X*) continue ;; esac
		l="$l $p"
	done
	[ -n "$l" ] || break
	if [ "$t" -eq 0 ]; then kill -s TERM $l 2>/dev/null; elif [ "$t" -ge 20 ]; then kill -s KILL $l 2>/dev/null; fi
	sleep 0.1 2>/dev/null || sleep 1
	t=$((t + 1))
done
exit "$s"`

// subreaperPy makes the python3 it runs a child subreaper and execs the
// rest of its arguments; popCoerce drops the variable that turned
// Python's locale coercion off, so the job's environment is as it was.
const (
	// subreaperPl is the same in perl, which has no prctl of its own,
	// and starts the session: both system calls by their numbers, known
	// for the architectures listed (on any other the leader is no
	// subreaper, as without python3, and setsid(1) starts the session).
	// The architecture is the machine field of perl's own ELF header
	// (64-bit, little-endian): reading it costs nothing, where loading
	// the Config module to ask for the archname was half of perl's start.
	subreaperPl = `my %n = (62 => [157, 112], 183 => [167, 157], 243 => [167, 157]);
my $k;
if (open(my $e, "<", "/proc/self/exe")) {
	binmode $e;
	my $h = "";
	$k = $n{unpack("v", substr($h, 18, 2))} if sysread($e, $h, 20) == 20 && substr($h, 4, 2) eq "\x02\x01";
}
unshift @ARGV, "setsid" unless $k && syscall($k->[1]) > 0;
syscall($k->[0], 36, 1, 0, 0, 0) if $k;
`
	popBadlang = `delete $ENV{PERL_BADLANG};
`
	popPerl5opt = `my $gl_o = delete $ENV{GPULAYER_PERL5OPT};
if (defined $gl_o && $gl_o ne "") { $ENV{PERL5OPT} = substr($gl_o, 1) } else { delete $ENV{PERL5OPT} }
`
	execRestPl = `exec { $ARGV[0] } @ARGV or exit 127;
`
	subreaperPy = `import os, sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
except Exception:
    pass
`
	popCoerce = `os.environ.pop("PYTHONCOERCECLOCALE", None)
`
	execRest = `os.execvp(sys.argv[1], sys.argv[1:])
`
)

// leaderPl is the perl that becomes a node's leader: it takes the
// node's log, the claims directory, the GPUs to claim (NAME INDEX pairs,
// none for a CPU-only node) and the claims' words before the holder
// (LINEAGE JOB RUN RANK), then the leader's command line. The launch
// starts it in the background inside a command substitution, which ends
// when perl closes its standard output as it was started: perl prints
// there, once it is ready, "PID PID_NAMESPACE" (- when unknown), or
// "error KIND MESSAGE" when it cannot start the node (perlStartedScript
// reads it). So the launch goes on once the leader leads its session,
// with no sleep to wait for it, and no fork of perl.
//
// Before it execs the command line, perl: makes the log's directory
// (mkdir -p, with the launch's umask) and opens the log as its standard
// output and error; under an flock(2) lock on the claims directory's
// .lock (waited for 10 s at most), checks every GPU's claim as the shell
// does (claimScript: refused when live and not this node's, with the
// same messages) and then writes each claim naming itself (pid and start
// time: it is the leader), to a file renamed into place, and releases
// the lock; starts its session and becomes a subreaper (subreaperPl);
// and drops what was set only for perl (pops). A failure stops it before
// the command starts, its claims unwritten.
func leaderPl(pops string) string {
	return `my ($gl_log, $gl_claims, $gl_gpus, $gl_head) = splice(@ARGV, 0, 4);
open(my $gl_w, ">&", \*STDOUT) or exit 1;
sub gl_fail {
	syswrite($gl_w, "error $_[0] $_[1]\n");
	exit 1;
}
sub gl_mkdir {
	my $d = shift;
	return if -d $d;
	(my $up = $d) =~ s{/+[^/]*/*$}{};
	gl_mkdir($up) if $up ne "" && $up ne $d;
	mkdir $d;
}
(my $gl_dir = $gl_log) =~ s{/[^/]*$}{};
gl_mkdir($gl_dir);
-d $gl_dir or gl_fail("rundir", "cannot create $gl_dir");
open(STDOUT, ">", $gl_log) or gl_fail("rundir", "cannot write $gl_log");
open(STDERR, ">&", \*STDOUT) or gl_fail("rundir", "cannot write $gl_log");
sub gl_startof {
	my $l;
	open(my $s, "<", "/proc/$_[0]/stat") or return undef;
	$l = <$s>;
	close($s);
	return undef unless defined $l;
	$l =~ s/^.*\) //s;
	my @f = split(/ /, $l);
	return undef if $f[0] =~ /^[ZX]/;
	return $f[19];
}
if ($gl_gpus ne "") {
	open(my $lk, ">>", "$gl_claims/.lock") or gl_fail("claim", "cannot open $gl_claims/.lock");
	{
		local $SIG{ALRM} = sub { gl_fail("claim", "another launch held $gl_claims/.lock for 10 s") };
		alarm(10);
		flock($lk, 2) or gl_fail("claim", "cannot lock $gl_claims/.lock");
		alarm(0);
	}
	my @g = split(/ /, $gl_gpus);
	my @me = split(/ /, $gl_head);
	for (my $i = 0; $i + 1 < @g; $i += 2) {
		my $f = "$gl_claims/$g[$i]";
		next unless -e $f;
		-f $f or gl_fail("claimed", "$f is not a regular file");
		# A claim is a line of some hundred bytes: the first 512 are
		# plenty, and never all of a runaway file.
		my $l = "";
		if (open(my $c, "<", $f)) { sysread($c, $l, 512); close($c); }
		$l =~ s/\n.*//s;
		my @w = split(" ", $l);
		next unless @w == 7 && $w[0] eq "v1";
		next if $w[1] eq $me[0] && $w[3] eq $me[2] && $w[4] eq $me[3];
		next unless $w[5] =~ /^[0-9]+$/;
		my $st = gl_startof($w[5]);
		next unless defined $st && $st eq $w[6];
		gl_fail("claimed", "GPU $g[$i + 1] ($g[$i]) is claimed by job $w[2] (run $w[3], node $w[4]) of state $w[1], whose process $w[5] still runs");
	}
	my $start = gl_startof($$);
	$start = 0 unless defined $start && $start =~ /^[0-9]+$/;
	for (my $i = 0; $i + 1 < @g; $i += 2) {
		my ($t, $f) = ("$gl_claims/.$g[$i].$$", "$gl_claims/$g[$i]");
		my $c;
		(open($c, ">", $t) and print($c "v1 $gl_head $$ $start\n") and close($c) and rename($t, $f))
			or gl_fail("claim", "cannot write $f");
	}
	close($lk);
}
my $gl_ns = readlink("/proc/self/ns/pid");
$gl_ns = "-" unless defined $gl_ns && $gl_ns =~ /^pid:\[[0-9]+\]$/;
` + subreaperPl + pops + `syswrite($gl_w, "$$ $gl_ns\n");
close($gl_w);
` + execRestPl
}

// perlStartedScript reads what leaderPl printed into $gpulayer_pid and
// $gpulayer_pidns, or fails the launch with its error.
const perlStartedScript = `	case $gpulayer_leader in
	'error '*)
		gpulayer_leader=${gpulayer_leader#error }
		gpulayer_fail "${gpulayer_leader%% *}" "${gpulayer_leader#* }"
		;;
	esac
	# shellcheck disable=SC2086 # PID PID_NAMESPACE
	set -- $gpulayer_leader
	gpulayer_pid=$1 gpulayer_pidns=${2:--}
	case $gpulayer_pid in
	'' | *[!0-9]*) gpulayer_fail leader "perl did not start the leader (it printed: $gpulayer_leader)" ;;
	esac
`

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoteArgv quotes the program and arguments for sh, except argv[portAt]
// (torchrun's --master_port value; -1 for none), which is port: the shell
// variable the script set.
func quoteArgv(argv []string, portAt int, port string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ssh.Quote(a)
		if i == portAt {
			q[i] = portWord(port)
		}
	}
	return strings.Join(q, " ")
}

func portWord(port string) string {
	if strings.HasPrefix(port, "$") {
		return "\"" + port + "\""
	}
	return port
}

// pickPortScript sets gpulayer_port to the first of PortCandidates ports
// from first that no socket listens on, reading /proc/net/tcp and tcp6
// (local address column, state 0A = LISTEN; the port in hex, read by
// shell arithmetic, which every sh takes as 0x..., unlike printf's %X).
// grep picks the listening lines out first where the machine has it:
// the shell's read takes a byte per system call, and a busy machine's
// tables hold thousands of connections (TIME_WAIT included): read
// through whole, 4,600 lines took 0.4 s here, on the path of every
// node's launch (the others wait for node 0's port).
func pickPortScript(first int) string {
	return fmt.Sprintf(`gpulayer_listening=
gpulayer_listeners() {
	while read -r gpulayer_sl gpulayer_local gpulayer_remote gpulayer_st gpulayer_rest; do
		[ "$gpulayer_st" = 0A ] || continue
		gpulayer_listening="$gpulayer_listening $((0x${gpulayer_local##*:}))"
	done
}
gpulayer_grep=
command -v grep >/dev/null 2>&1 && gpulayer_grep=1
for gpulayer_f in /proc/net/tcp /proc/net/tcp6; do
	[ -r "$gpulayer_f" ] || continue
	if [ -n "$gpulayer_grep" ]; then
		gpulayer_listeners <<gpulayer_EOF
$(grep ' 0A ' "$gpulayer_f" 2>/dev/null)
gpulayer_EOF
	else
		gpulayer_listeners <"$gpulayer_f"
	fi
done
gpulayer_port=
gpulayer_try=%d
while [ "$gpulayer_try" -lt %d ]; do
	case " $gpulayer_listening " in
	*" $gpulayer_try "*) ;;
	*) gpulayer_port=$gpulayer_try; break ;;
	esac
	gpulayer_try=$((gpulayer_try + 1))
done
[ -n "$gpulayer_port" ] || gpulayer_fail port 'ports %d-%d are all in use on node 0; set master_port'
`, first, first+PortCandidates, first, first+PortCandidates-1)
}

// Started is what a node's launch reported.
type Started struct {
	PID        int
	StartTime  uint64
	BootID     string
	MasterPort int
	// PIDNamespace is the machine's pid namespace ("" when unknown).
	PIDNamespace string
	// Check is what the launch saw of the leader during the job's start
	// check: running at its end, or how it ended before.
	Check Checked
	// Ended says the leader had ended before the script could read its
	// start time (StartTime is 0, BootID and PIDNamespace unknown):
	// Check says how.
	Ended bool
}

// LaunchError is a node that could not start, with the script's reason.
type LaunchError struct {
	Kind    string // home, rundir, workdir, setsid, command_not_found, port, exited
	Message string
}

func (e *LaunchError) Error() string { return e.Message }

// ParseStarted reads the launch script's output.
func ParseStarted(out []byte) (Started, error) {
	// The start check's report comes last, and ends with the log of the
	// node: what follows its first line is the job's, never read as the
	// launch's.
	text, check := string(out), ""
	if i := lineStart(text, "gpulayer-check:"); i >= 0 {
		text, check = text[:i], text[i:]
	}
	var last string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "gpulayer-launch:") {
			last = l
		}
	}
	switch {
	case strings.HasPrefix(last, "gpulayer-launch:error "):
		kind, msg, _ := strings.Cut(strings.TrimPrefix(last, "gpulayer-launch:error "), " ")
		return Started{}, &LaunchError{Kind: kind, Message: msg}
	case strings.HasPrefix(last, "gpulayer-launch:ended "):
		// Ended before its start time could be read: only its report
		// says anything of it.
		f := strings.Fields(strings.TrimPrefix(last, "gpulayer-launch:ended "))
		if len(f) != 2 || check == "" {
			break
		}
		pid, err1 := strconv.Atoi(f[0])
		port, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || pid <= 0 {
			break
		}
		c, err := ParseChecked([]byte(check))
		if err != nil || c.Alive {
			break
		}
		return Started{PID: pid, MasterPort: port, Ended: true, Check: c}, nil
	case strings.HasPrefix(last, "gpulayer-launch:ok "):
		f := strings.Fields(strings.TrimPrefix(last, "gpulayer-launch:ok "))
		if len(f) != 4 && len(f) != 5 {
			break
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		port, err3 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
			break
		}
		boot := f[2]
		if boot == "-" {
			boot = ""
		}
		st := Started{PID: pid, StartTime: start, BootID: boot, MasterPort: port}
		if len(f) == 5 && f[4] != "-" {
			st.PIDNamespace = f[4]
		}
		if check == "" {
			return Started{}, fmt.Errorf("the launch script printed no start check (%q)", clip(string(out)))
		}
		c, err := ParseChecked([]byte(check))
		if err != nil {
			return Started{}, err
		}
		st.Check = c
		return st, nil
	}
	return Started{}, fmt.Errorf("the launch script printed no result (%q)", clip(string(out)))
}

// lineStart is the index of the first line of text that starts with
// prefix, or -1.
func lineStart(text, prefix string) int {
	for at := 0; at < len(text); {
		if strings.HasPrefix(text[at:], prefix) {
			return at
		}
		nl := strings.IndexByte(text[at:], '\n')
		if nl < 0 {
			break
		}
		at += nl + 1
	}
	return -1
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
