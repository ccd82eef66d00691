package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/ssh"
)

// script is the probe script as bytes, shared by every probe: a
// bytes.Reader hands the session its bytes as they are, where a
// strings.Reader's would be copied for every host (the channel takes
// []byte). Nothing writes to it.
var script = []byte(facts.Script())

// Runner runs one command on one host; *ssh.Pool is the one gpulayer uses.
type Runner interface {
	Run(ctx context.Context, t ssh.Target, command string, stdin io.Reader) (ssh.Result, error)
}

// Machine is one host to probe: how to reach it, and what the configuration
// and the provider say about where it is.
type Machine struct {
	Name   string
	Fleet  string
	Target ssh.Target
	// Provider is the trusted record of the provider that created the
	// machine; nil for machines that were declared, not created.
	Provider *facts.LocationClaim
	// Host and FleetDefaults are the configuration's word: the host
	// block's own values and the fleet's defaults.
	Host, FleetDefaults facts.LocationClaim
	// Watch are processes state says run there, to check for liveness.
	Watch []Watch
}

// Defaults of Options.
const (
	DefaultParallelism = 64
	// DefaultTimeout bounds one host's whole session. The script bounds
	// its slow commands at 20 s each; a host slower than this is recorded
	// as failed and the others go on.
	DefaultTimeout = 90 * time.Second
)

// Options tune a probe.
type Options struct {
	// Parallelism is the most hosts probed at once; 0 means
	// DefaultParallelism.
	Parallelism int
	// Timeout bounds each host's probe; 0 means DefaultTimeout.
	Timeout time.Duration
	// Progress, when set, is called after each host finishes, one call at
	// a time, with the number of hosts done so far.
	Progress func(done, total int, host *facts.Host)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Fleet probes every machine and returns their facts, in the order given.
// It never fails as a whole: a host that cannot be probed has its error in
// its facts. Cancelling ctx ends every probe still running.
func Fleet(ctx context.Context, r Runner, machines []Machine, opts Options) *facts.Document {
	par := opts.Parallelism
	if par <= 0 {
		par = DefaultParallelism
	}
	doc := &facts.Document{Version: facts.Version, Hosts: make([]facts.Host, len(machines))}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	work := make(chan int)
	for w := 0; w < min(par, len(machines)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				doc.Hosts[i] = Host(ctx, r, machines[i], opts)
				if opts.Progress != nil {
					mu.Lock()
					done++
					opts.Progress(done, len(machines), &doc.Hosts[i])
					mu.Unlock()
				}
			}
		}()
	}
	for i := range machines {
		work <- i
	}
	close(work)
	wg.Wait()
	return doc
}

// Host probes one machine in one SSH session.
func Host(ctx context.Context, r Runner, m Machine, opts Options) facts.Host {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	nonce := facts.NewNonce()
	res, err := r.Run(ctx, m.Target, Command(nonce, m.Watch), bytes.NewReader(script))
	tooLarge := tooLargeOutput(res)

	var h facts.Host
	switch {
	case tooLarge != "":
		// A real probe prints about 10 KB: this machine is broken or
		// hostile, and nothing it printed is kept.
		h = facts.Host{GPUs: []facts.GPU{}, FreeGPUs: []int{}}
	case err == nil || len(res.Stdout) > 0:
		// What arrived is worth reading even when the session broke off:
		// its warnings say which sections are missing.
		h = facts.Parse(res.Stdout, nonce)
	default:
		h = facts.Host{GPUs: []facts.GPU{}, FreeGPUs: []int{}}
	}
	switch {
	case tooLarge != "":
		h.Status = facts.StatusFailed
		h.Error = tooLarge
		if err != nil {
			h.Error += ": " + err.Error()
		}
	case err != nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		h.Status = facts.StatusFailed
		h.Error = fmt.Sprintf("probe timed out after %s: %v", timeout, err)
	case err != nil && len(res.Stdout) > 0:
		h.Status = facts.StatusFailed
		h.Error = err.Error()
	case err != nil:
		h.Status = facts.StatusUnreachable
		h.Error = err.Error()
	case res.ExitCode != 0:
		h.Status = facts.StatusFailed
		h.Error = fmt.Sprintf("probe script exited with status %d%s", res.ExitCode, stderrSuffix(res.Stderr))
	case h.Status != facts.StatusOK:
		// Parse found none of the script's sections.
		h.Error += stderrSuffix(res.Stderr)
	default:
		if s := firstLines(res.Stderr, 3); s != "" {
			h.Warnings = append(h.Warnings, "the probe script wrote to stderr: "+s)
		}
	}

	h.Name = m.Name
	h.Fleet = m.Fleet
	h.Address = m.Target.Address
	h.Port = m.Target.Port
	metadata := facts.MetadataClaim(h.Location)
	provider := facts.LocationClaim{}
	if m.Provider != nil {
		provider = *m.Provider
		provider.Source = facts.SourceProvider
	}
	host, fleet := m.Host, m.FleetDefaults
	host.Source, fleet.Source = facts.SourceHost, facts.SourceFleet
	host, fleet = facts.BesideMetadata(metadata, host, fleet)
	h.Location = facts.ResolveLocation(provider, metadata, host, fleet)
	if w := metadataDisagrees(metadata, facts.ResolveLocation(host, fleet)); w != "" && provider.Zone == "" {
		h.Warnings = append(h.Warnings, w)
	}
	h.ProbedAt = now().UTC()
	return h
}

// metadataName is how warnings name the metadata service a location
// source is, "" for a source that is none.
func metadataName(source string) string {
	switch source {
	case facts.SourceGCEMetadata:
		return "GCE"
	case facts.SourceEC2Metadata:
		return "EC2"
	case facts.SourceAzureMetadata:
		return "Azure"
	}
	return ""
}

// metadataDisagrees says where the machine's metadata service (GCE, EC2,
// Azure) names another region or zone than the configuration. The
// metadata wins (docs/facts.md, ADR-0021), but a configuration that says
// otherwise is likely a mistake on one side, and the user should not
// learn of it from a placement.
func metadataDisagrees(md facts.LocationClaim, config facts.Location) string {
	var diffs []string
	for _, f := range []struct{ name, machine, config string }{
		{"region", md.Region, config.Region},
		{"zone", md.Zone, config.Zone},
	} {
		if f.machine != "" && f.config != "" && f.machine != f.config {
			diffs = append(diffs, fmt.Sprintf("%s %q where the configuration says %q", f.name, f.machine, f.config))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the machine's " + metadataName(md.Source) + " metadata names " + strings.Join(diffs, " and ") +
		"; the metadata is used, as it ranks above the configuration"
}

// tooLargeOutput says why res is more than a probe may print, or "" when
// it is not. Output that reaches facts.MaxOutputBytes counts: a pool made
// with that MaxOutputBytes (as gpulayer's is) keeps exactly that much of a
// longer output, and a real probe is a hundred times smaller.
func tooLargeOutput(res ssh.Result) string {
	for _, o := range []struct {
		name string
		text []byte
	}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if len(o.text) >= facts.MaxOutputBytes {
			return fmt.Sprintf("the probe's %s reached %d bytes, the most a probe may write (a real one writes about 10 KB)", o.name, facts.MaxOutputBytes)
		}
	}
	return ""
}

// Watch is a process the probe asks about: its pid and, when gpulayer
// launched it, the stem of its node's files under ~/.gpulayer/runs
// ("JOB/RUN_ID/node-N"), where its exit status and log are read once it is
// gone.
type Watch struct {
	PID  int
	Node string
	// Stall asks how long ago the node's log and heartbeat file changed:
	// its job has a stall_timeout.
	Stall bool
}

// Command is the remote command line of a probe: the script itself goes
// on standard input. The nonce is hex, the pids integers and the node
// stems job names, run ids and ranks, and all are quoted all the same, so
// nothing here can be read as shell syntax by the remote login shell.
func Command(nonce string, watch []Watch) string {
	var b strings.Builder
	b.WriteString("sh -s -- ")
	b.WriteString(ssh.Quote(nonce))
	for _, w := range watch {
		if w.PID <= 0 {
			continue
		}
		arg := strconv.Itoa(w.PID)
		if w.Node != "" && !strings.Contains(w.Node, "..") {
			arg += ":" + w.Node
			if w.Stall {
				arg += ":s"
			}
		}
		b.WriteByte(' ')
		b.WriteString(ssh.Quote(arg))
	}
	return b.String()
}

func stderrSuffix(stderr []byte) string {
	if s := firstLines(stderr, 3); s != "" {
		return ": " + s
	}
	return ""
}

// firstLines returns up to n non-blank lines of text joined by " | ",
// clipped, for an error message.
func firstLines(text []byte, n int) string {
	var out []string
	for _, l := range strings.Split(string(text), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	s := strings.Join(out, " | ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
