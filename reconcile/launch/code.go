package launch

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// CodeRoot is where a machine keeps the jobs' code, relative to the home
// directory: CodeRoot/JOB/HASH/ holds one tree, complete (it is renamed
// there only once unpacked whole).
const CodeRoot = ".gpulayer/code"

// CodeKeep is how many code directories of a job a machine keeps.
const CodeKeep = 3

// UploadTimeout bounds one machine's code upload (apply's session).
const UploadTimeout = 30 * time.Minute

// staleUpload is the age past which an upload's temporary directory can
// only be one whose session ended without removing it (the connection
// lost and tar killed with it): no upload lasts that long.
const staleUpload = 2 * UploadTimeout

// SetupRoot holds the markers of setups that succeeded:
// SetupRoot/JOB/KEY, KEY from the setup text and the code's hash.
const SetupRoot = ".gpulayer/setup"

// CodeDir is a job's code directory for a tree hash, relative to home.
func CodeDir(job, hash string) string { return CodeRoot + "/" + job + "/" + hash }

// SetupLogPath is a node's setup log, beside its log.
func SetupLogPath(job, runID string, rank int) string {
	return fmt.Sprintf("%s/%s/%s/node-%d.setup.log", RunsDir, job, runID, rank)
}

// SetupKey names a setup's marker: the setup runs once per machine for
// each setup text and code.
func SetupKey(s state.JobSpec) string {
	h := sha256.Sum256([]byte(s.Setup + "\x00" + s.CodeHash()))
	return hex.EncodeToString(h[:16])
}

// HasCodeScript prints "gpulayer-code:present" when the machine has the
// job's code directory for hash (and marks it as just used, so that the
// pruning of old directories keeps it), else "gpulayer-code:absent".
func HasCodeScript(job, hash string) string {
	dir := ssh.Quote(CodeDir(job, hash))
	return "cd \"$HOME\" || exit 1\n" +
		"if [ -d " + dir + " ]; then touch " + dir + " 2>/dev/null; echo gpulayer-code:present; else echo gpulayer-code:absent; fi\n"
}

// UploadCommand is the remote command that unpacks a code tree, a gzip
// tar on its standard input, into CodeDir(job, hash). The script is in
// the command line (standard input is the tar), quoted for the login
// shell. It unpacks into a temporary directory beside the final one and
// renames it only when tar succeeded: a stream cut short (the connection
// lost, apply interrupted, a file that changed while it was sent) leaves
// no directory at the final name, and the temporary one is removed (or,
// where the session was killed before it could be, by a later upload once
// it is older than any upload can last). Then the job's code directories
// beyond the CodeKeep most recently used are removed. The last line printed is "gpulayer-upload:ok" or
// "gpulayer-upload:error MESSAGE".
func UploadCommand(job, hash string) string {
	base := ssh.Quote(CodeRoot + "/" + job)
	final := ssh.Quote(CodeDir(job, hash))
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\n") }
	w("umask 077")
	w("gpulayer_fail() { printf 'gpulayer-upload:error %s\\n' \"$1\"; exit 1; }")
	w("cd \"$HOME\" || gpulayer_fail 'cannot enter the home directory'")
	w("mkdir -p " + base + " || gpulayer_fail " + ssh.Quote("cannot create ~/"+CodeRoot+"/"+job))
	w("find " + base + " -maxdepth 1 -name '.tmp-*' -mmin +" + strconv.Itoa(int(staleUpload.Minutes())) + " -exec rm -rf {} \\; 2>/dev/null")
	w("gpulayer_tmp=" + base + "/.tmp-" + ssh.Quote(hash) + "-$$")
	w("rm -rf \"$gpulayer_tmp\"; mkdir \"$gpulayer_tmp\" || gpulayer_fail 'cannot create a temporary directory'")
	w("if ! tar xzf - -C \"$gpulayer_tmp\" 2>\"$gpulayer_tmp.err\"; then")
	w("\tgpulayer_err=$(head -c 300 \"$gpulayer_tmp.err\" | tr '\\n' ' ')")
	w("\trm -rf \"$gpulayer_tmp\" \"$gpulayer_tmp.err\"")
	w("\tgpulayer_fail \"tar failed: $gpulayer_err\"")
	w("fi")
	w("rm -f \"$gpulayer_tmp.err\"")
	// A directory already at the final name is complete (only a rename
	// puts one there): mv would move ours into it.
	w("if [ -e " + final + " ]; then rm -rf \"$gpulayer_tmp\"; else mv \"$gpulayer_tmp\" " + final + " || { rm -rf \"$gpulayer_tmp\"; gpulayer_fail 'cannot rename the code directory'; }; fi")
	w("touch " + final + " 2>/dev/null")
	w("gpulayer_n=0")
	w("for gpulayer_d in $(ls -1t " + base + "); do")
	w("\tgpulayer_n=$((gpulayer_n + 1))")
	w("\t[ \"$gpulayer_n\" -le " + strconv.Itoa(CodeKeep) + " ] || rm -rf " + base + "/\"$gpulayer_d\"")
	w("done")
	w("echo gpulayer-upload:ok")
	return "sh -c " + ssh.Quote(b.String()) + " gpulayer-upload " + ssh.Quote(job) + " " + ssh.Quote(hash)
}

// ParseUpload reads what UploadCommand printed.
func ParseUpload(out []byte) error {
	last := lastLine(out, "gpulayer-upload:")
	switch {
	case last == "gpulayer-upload:ok":
		return nil
	case strings.HasPrefix(last, "gpulayer-upload:error "):
		return fmt.Errorf("code upload failed: %s", clip(strings.TrimPrefix(last, "gpulayer-upload:error ")))
	}
	return fmt.Errorf("the code upload printed no result (%q)", clip(string(out)))
}

// SetupTailLines is how many lines of a failed setup's log come back.
const SetupTailLines = 20

// SetupScript runs the job's setup on node n's machine, in the node's
// working directory with its environment, its output to the node's setup
// log, bounded by the job's setup_timeout (with `timeout` where the
// machine has it; apply's session is bounded too). A marker left by a
// success makes it print "gpulayer-setup:skipped" the next time, for the
// same setup and code. Its last lines are "gpulayer-setup:ok",
// "gpulayer-setup:skipped", "gpulayer-setup:error KIND MESSAGE" (it could
// not run), or "gpulayer-setup:failed STATUS" followed by the log's last
// lines, each "gpulayer-setup:log LINE".
func SetupScript(n Node) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# gpulayer setup: job %s, run %s, node %d\n", n.Job, n.RunID, n.Rank)
	w("umask 077\n")
	w("gpulayer_fail() { printf 'gpulayer-setup:error %%s %%s\\n' \"$1\" \"$2\"; exit 1; }\n")
	w("[ -n \"$HOME\" ] && [ -d \"$HOME\" ] || gpulayer_fail home 'the login has no home directory'\n")
	w("cd \"$HOME\" || gpulayer_fail home 'cannot enter the home directory'\n")
	marker := ssh.Quote(SetupRoot + "/" + n.Job + "/" + SetupKey(n.Spec))
	w("if [ -f %s ]; then echo gpulayer-setup:skipped; exit 0; fi\n", marker)
	w("gpulayer_dir=%s\n", ssh.Quote(RunsDir+"/"+n.Job+"/"+n.RunID))
	w("mkdir -p \"$gpulayer_dir\" || gpulayer_fail rundir \"cannot create $HOME/$gpulayer_dir\"\n")
	w("gpulayer_setup_log=\"$HOME/$gpulayer_dir/node-%d.setup.log\"\n", n.Rank)
	w("%s", workdirScript(n))
	w("gpulayer_port=%d\n", n.MasterPort)
	for _, v := range Env(n) {
		w("export %s=%s\n", v.Name, envValue(v))
	}
	secs := int(time.Duration(n.Spec.SetupTimeout).Seconds())
	if secs <= 0 {
		secs = int(DefaultSetupTimeout.Seconds())
	}
	setup := ssh.Quote(n.Spec.Setup)
	w("rm -f \"$gpulayer_setup_log\"\n")
	w("if command -v timeout >/dev/null 2>&1; then\n")
	w("\ttimeout %d sh -c %s </dev/null >\"$gpulayer_setup_log\" 2>&1\n", secs, setup)
	w("else\n")
	w("\tsh -c %s </dev/null >\"$gpulayer_setup_log\" 2>&1\n", setup)
	w("fi\n")
	w("gpulayer_status=$?\n")
	w("if [ \"$gpulayer_status\" -eq 0 ]; then\n")
	// In the working directory now: the marker's path is the home's.
	w("\tmkdir -p \"$HOME\"/%s && : >\"$HOME\"/%s\n", ssh.Quote(SetupRoot+"/"+n.Job), marker)
	w("\techo gpulayer-setup:ok\n")
	w("\texit 0\n")
	w("fi\n")
	w("echo \"gpulayer-setup:failed $gpulayer_status\"\n")
	w("tail -n %d \"$gpulayer_setup_log\" 2>/dev/null | head -c 16384 | sed 's/^/gpulayer-setup:log /'\n", SetupTailLines)
	w("exit 0\n")
	return b.String()
}

// DefaultSetupTimeout is the bound of a setup whose spec names none.
const DefaultSetupTimeout = 30 * time.Minute

// SetupResult is how a node's setup went.
type SetupResult struct {
	Skipped bool
	// Failed says the setup ran and exited with Status; LogTail is its
	// log's end.
	Failed  bool
	Status  int
	LogTail []string
}

// ParseSetup reads what SetupScript printed; an error is a setup that
// could not run at all.
func ParseSetup(out []byte) (SetupResult, error) {
	var res SetupResult
	var last string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		l := sc.Text()
		if line, ok := strings.CutPrefix(l, "gpulayer-setup:log "); ok {
			if len(res.LogTail) < SetupTailLines {
				res.LogTail = append(res.LogTail, clip(line))
			}
			continue
		}
		if strings.HasPrefix(l, "gpulayer-setup:") {
			last = strings.TrimSpace(l)
		}
	}
	switch {
	case last == "gpulayer-setup:ok":
		return SetupResult{}, nil
	case last == "gpulayer-setup:skipped":
		return SetupResult{Skipped: true}, nil
	case strings.HasPrefix(last, "gpulayer-setup:failed "):
		st, err := strconv.Atoi(strings.TrimPrefix(last, "gpulayer-setup:failed "))
		if err != nil {
			break
		}
		res.Failed, res.Status = true, st
		return res, nil
	case strings.HasPrefix(last, "gpulayer-setup:error "):
		kind, msg, _ := strings.Cut(strings.TrimPrefix(last, "gpulayer-setup:error "), " ")
		return SetupResult{}, &LaunchError{Kind: kind, Message: clip(msg)}
	}
	return SetupResult{}, fmt.Errorf("the setup script printed no result (%q)", clip(string(out)))
}

// workdirScript enters the node's working directory: its workdir when
// set, else its code directory when the job has code, else the home
// directory; it sets gpulayer_code to the code directory (checked) for
// GPULAYER_CODE_DIR.
func workdirScript(n Node) string {
	var b strings.Builder
	if c := n.Spec.Code; c != nil {
		dir := CodeDir(n.Job, c.Hash)
		fmt.Fprintf(&b, "gpulayer_code=\"$HOME\"/%s\n", ssh.Quote(dir))
		fmt.Fprintf(&b, "[ -d \"$gpulayer_code\" ] || gpulayer_fail code %s\n", ssh.Quote("the code directory ~/"+dir+" is missing"))
	}
	switch {
	case n.Spec.Workdir != "":
		fmt.Fprintf(&b, "cd %s 2>/dev/null || gpulayer_fail workdir %s\n", ssh.Quote(n.Spec.Workdir),
			ssh.Quote("workdir "+n.Spec.Workdir+" does not exist or cannot be entered"))
	case n.Spec.Code != nil:
		b.WriteString("cd \"$gpulayer_code\" || gpulayer_fail code 'cannot enter the code directory'\n")
	}
	return b.String()
}

// envValue is a variable's value in a script: quoted, except those the
// script knows only on the machine.
func envValue(v Var) string {
	switch v.Name {
	case "MASTER_PORT":
		return "\"$gpulayer_port\""
	case "GPULAYER_CODE_DIR":
		return "\"$gpulayer_code\""
	}
	return ssh.Quote(v.Value)
}

func lastLine(out []byte, prefix string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, prefix) {
			last = l
		}
	}
	return last
}
