// Package launch writes the shell scripts that start and stop one node of
// a job on its machine, and reads what they print (docs/apply.md). It is
// pure: apply sends the scripts over SSH as `sh -s` with the script on
// standard input, so the remote login shell only ever parses "sh -s", and
// every value inside a script is quoted for sh with ssh.Quote.
package launch

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// Command is the remote command line of a script of kind "launch", "stop"
// or "check": `sh -s -- gpulayer-launch train r0123 1`, the script on
// standard input. The script ignores the words after --: they name the
// session in process lists and sshd's logs (and the sandbox's machines
// watch for launches by them). Every word is quoted for the login shell.
func Command(kind string, words ...string) string {
	return "sh -s -- " + quoteAll(append([]string{"gpulayer-" + kind}, words...))
}

// RunsDir is where a machine keeps each node's log and exit status,
// relative to the remote user's home: RunsDir/JOB/RUN_ID/node-RANK.log.
const RunsDir = ".gpulayer/runs"

// Node is what starting one node of a job needs.
type Node struct {
	Job   string
	RunID string
	Rank  int
	Spec  state.JobSpec
	// GPUs are the node's GPU indices, and GPUUUIDs their UUIDs (same
	// order) when the probe knew them.
	GPUs     []int
	GPUUUIDs []string
	// MasterAddr is node 0's address as the other nodes reach it.
	MasterAddr string
	// MasterPort is the rendezvous port; on node 0, when the job sets no
	// port, it is only the first candidate (see PickPort).
	MasterPort int
	// PickPort makes node 0's script take the first of MasterPort and the
	// PortCandidates-1 ports after it that nothing listens on.
	PickPort bool
	// StartCheck is how long the launch script watches the node's
	// process after its start before it reports it started
	// (Started.Check); it reports an end as soon as it sees one.
	StartCheck time.Duration
	// Lineage is the state's lineage: the node's GPU claims name it, so
	// that another configuration's launch on the machine sees whose they
	// are (see ClaimsDir).
	Lineage string
}

// PortCandidates is how many ports node 0 tries from a job's default port.
const PortCandidates = 16

// DefaultPort is the first port tried for a job that sets no master_port:
// the same for every launch of the job (20000-29999, from its name), so
// firewalls and people can expect it.
func DefaultPort(job string) int {
	h := fnv.New32a()
	h.Write([]byte(job))
	return 20000 + int(h.Sum32()%10000)
}

// LogPath and ExitPath are the node's files, relative to the home
// directory.
func LogPath(job, runID string, rank int) string {
	return fmt.Sprintf("%s/%s/%s/node-%d.log", RunsDir, job, runID, rank)
}

func ExitPath(job, runID string, rank int) string {
	return fmt.Sprintf("%s/%s/%s/node-%d.exit", RunsDir, job, runID, rank)
}

// HeartbeatPath is the node's heartbeat file (GPULAYER_HEARTBEAT_FILE):
// touching it tells a stall_timeout the node is making progress even when
// it logs nothing.
func HeartbeatPath(job, runID string, rank int) string {
	return fmt.Sprintf("%s/%s/%s/node-%d.heartbeat", RunsDir, job, runID, rank)
}

// Var is one environment variable.
type Var struct{ Name, Value string }

// Defaults are the variables every node gets unless the job's env sets
// them: Python's output unbuffered, so a node's log shows what it printed
// as it printed it (a worker that hangs or is killed leaves its last lines,
// not a lost buffer); and NCCL's asynchronous error handling (the name
// torch 2.2 and later read, and the older one), so that an NCCL error or
// timeout ends the worker's process instead of leaving it blocked in a
// collective, and the node is seen to have failed.
var Defaults = map[string]string{
	"PYTHONUNBUFFERED":                "1",
	"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
	"NCCL_ASYNC_ERROR_HANDLING":       "1",
}

// Env is the node's environment beyond the login's: Defaults and the job's
// env first (the job's value winning), then gpulayer's variables, which
// win over the job's of the same name (sorted by name within each part, so
// a script is the same every time).
func Env(n Node) []Var {
	own := map[string]string{
		"GPULAYER_JOB":         n.Job,
		"GPULAYER_RUN_ID":      n.RunID,
		"GPULAYER_NODE_RANK":   strconv.Itoa(n.Rank),
		"GPULAYER_NODE_ID":     NodeID(n.RunID, n.Rank),
		"MASTER_ADDR":          n.MasterAddr,
		"MASTER_PORT":          strconv.Itoa(n.MasterPort),
		"WORLD_SIZE":           strconv.Itoa(n.Spec.Nodes * max(n.Spec.GPUsPerNode, 1)),
		"NNODES":               strconv.Itoa(n.Spec.Nodes),
		"NODE_RANK":            strconv.Itoa(n.Rank),
		"NPROC_PER_NODE":       strconv.Itoa(max(n.Spec.GPUsPerNode, 1)),
		"CUDA_DEVICE_ORDER":    "PCI_BUS_ID",
		"CUDA_VISIBLE_DEVICES": visibleDevices(n),
	}
	if n.Spec.Code != nil {
		// The script knows the directory's full path only on the machine
		// ($HOME): see envValue.
		own["GPULAYER_CODE_DIR"] = CodeDir(n.Job, n.Spec.Code.Hash)
	}
	job := maps.Clone(Defaults)
	maps.Copy(job, n.Spec.Env)
	var out []Var
	for _, k := range slices.Sorted(maps.Keys(job)) {
		if _, ours := own[k]; !ours {
			out = append(out, Var{k, job[k]})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(own)) {
		out = append(out, Var{k, own[k]})
	}
	return out
}

// visibleDevices is CUDA_VISIBLE_DEVICES: the GPUs by UUID when every one
// is known (indices can change order across reboots and driver updates;
// UUIDs cannot), else by index. Empty for a CPU-only node, which hides
// every GPU.
func visibleDevices(n Node) string {
	if len(n.GPUUUIDs) == len(n.GPUs) && len(n.GPUs) > 0 {
		return strings.Join(n.GPUUUIDs, ",")
	}
	ids := make([]string, len(n.GPUs))
	for i, g := range n.GPUs {
		ids[i] = strconv.Itoa(g)
	}
	return strings.Join(ids, ",")
}

// Argv is the program and arguments a node runs. The plain launcher runs
// the command as it is. torchrun runs it under a static rendezvous:
// `torchrun --nnodes N --nproc_per_node G --node_rank R --master_addr A
// --master_port P --max_restarts 0`, the job's torchrun args, and then
// the command: a command that starts with python or python3 gives
// torchrun its script and arguments (torchrun starts the workers' python
// itself); any other program is run with --no_python.
//
// The options are spelled with underscores, the only spelling torch 1.x
// takes (torch 2 takes both). --max_restarts is 0 because a static
// rendezvous cannot restart workers across nodes: a node whose worker
// fails ends, and gpulayer replaces the job as a whole.
func Argv(n Node) []string {
	argv, _ := argvWithPort(n)
	return argv
}

// argvWithPort is Argv and the index of torchrun's --master_port value
// (-1 for the plain launcher): the launch script puts the port node 0
// picked there, and nowhere else, whatever the command's own arguments.
func argvWithPort(n Node) ([]string, int) {
	cmd := n.Spec.Command
	if n.Spec.Launcher != "torchrun" {
		return slices.Clone(cmd), -1
	}
	argv := []string{"torchrun",
		"--nnodes", strconv.Itoa(n.Spec.Nodes),
		"--nproc_per_node", strconv.Itoa(max(n.Spec.GPUsPerNode, 1)),
		"--node_rank", strconv.Itoa(n.Rank),
		"--master_addr", n.MasterAddr,
		"--master_port", strconv.Itoa(n.MasterPort),
		"--max_restarts", "0",
	}
	port := slices.Index(argv, "--master_port") + 1
	python := len(cmd) > 1 && (cmd[0] == "python" || cmd[0] == "python3") && !strings.HasPrefix(cmd[1], "-")
	if !python {
		// Before the job's own args: a "--" among them ends torchrun's
		// options.
		argv = append(argv, "--no_python")
	}
	argv = append(argv, n.Spec.TorchrunArgs...)
	if python {
		return append(argv, cmd[1:]...), port
	}
	return append(argv, cmd...), port
}

// quoteAll quotes every word for sh.
func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ssh.Quote(w)
	}
	return strings.Join(q, " ")
}

// MaxOutputBytes bounds what apply keeps of a launch, check or stop
// script's output: each prints a line or two, and a check at most the
// end of a log (16 KiB).
const MaxOutputBytes = 1 << 20

// Timeout bounds one node's launch script on its machine.
const Timeout = 30 * time.Second
