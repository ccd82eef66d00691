package planview

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// State writes what state records: each job with its status, run and
// nodes (host, address, GPUs, pid), and the machines providers created.
// where names the state ("local file .gpulayer/state.json").
func State(w io.Writer, st *state.State, where string, opts Options) error {
	bw := bufio.NewWriter(w)
	sty := newStyles(w, opts.Color)
	if st.Lineage == "" {
		fmt.Fprintf(bw, "No state yet at %s: gpulayer has launched nothing here.\n", clean(where))
		return bw.Flush()
	}
	fmt.Fprintf(bw, "State: %s (lineage %s, serial %d)\n", clean(where), clean(st.Lineage), st.Serial)
	if len(st.Jobs) == 0 {
		fmt.Fprintln(bw, "\nNo jobs.")
	}
	for _, j := range st.Jobs {
		fmt.Fprintln(bw)
		fmt.Fprintf(bw, "%s  %s  run %s", sty.bold.Render("job "+strconv.Quote(clean(j.Name))), statusWord(j.Status, sty), clean(j.RunID))
		if !j.LaunchedAt.IsZero() {
			fmt.Fprintf(bw, "  launched %s", j.LaunchedAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(bw)
		if j.Error != "" {
			fmt.Fprintf(bw, "  error: %s\n", clean(j.Error))
		}
		rows := make([][]string, 0, len(j.Nodes))
		for _, n := range j.Nodes {
			addr := n.Address
			if n.Port != 0 {
				addr = net.JoinHostPort(n.Address, strconv.Itoa(n.Port))
			}
			pid := "not started"
			if n.Process != nil {
				pid = "pid " + strconv.Itoa(n.Process.PID)
			}
			rows = append(rows, []string{"node " + strconv.Itoa(n.Rank), clean(n.Host), clean(addr), gpuWords(n.GPUs), pid})
		}
		writeColumns(bw, "  ", rows)
	}
	if len(st.Machines) > 0 {
		fmt.Fprintln(bw)
		fmt.Fprintln(bw, "Machines created by gpulayer:")
		rows := make([][]string, 0, len(st.Machines))
		for _, m := range st.Machines {
			rows = append(rows, []string{clean(m.Fleet), clean(m.Name), clean(m.Provider), clean(m.Zone), clean(m.InternalIP), clean(m.Status)})
		}
		writeColumns(bw, "  ", rows)
	}
	return bw.Flush()
}

func statusWord(s string, sty styles) string {
	switch s {
	case state.JobRunning, state.JobSucceeded:
		return sty.create.Render(s)
	case state.JobFailed, state.JobLost:
		return sty.fail.Render(s)
	case state.JobRestarting, reconcile.RunUnknown, reconcile.JobPending:
		return sty.wait.Render(s)
	}
	return sty.replace.Render(s)
}

// Status writes what `gpulayer status` found: each job's lifecycle state,
// its restarts and last failure, its nodes with their processes (running
// for how long, or how they ended) and, in a report of one job, its runs.
func Status(w io.Writer, r *reconcile.StatusReport, where string, opts Options) error {
	bw := bufio.NewWriter(w)
	sty := newStyles(w, opts.Color)
	if r.Lineage == "" {
		fmt.Fprintf(bw, "No state yet at %s: gpulayer has launched nothing here.\n", clean(where))
		return bw.Flush()
	}
	if len(r.Jobs)+len(r.Leftovers) == 0 {
		fmt.Fprintln(bw, "No jobs.")
	}
	first := true
	write := func(js reconcile.JobStatus, leftover bool) {
		if !first {
			fmt.Fprintln(bw)
		}
		first = false
		title := "job " + strconv.Quote(clean(js.Job))
		if leftover {
			title = "leftover run of " + title
		}
		word := js.State
		if word == "" {
			word = js.Status
		}
		fmt.Fprintf(bw, "%s  %s  run %s", sty.bold.Render(title), statusWord(word, sty), clean(js.RunID))
		// Port 0: node 0 never started, so never chose one; there is no
		// rendezvous to name.
		if js.MasterAddr != "" && js.MasterPort > 0 {
			fmt.Fprintf(bw, "  master %s", clean(net.JoinHostPort(js.MasterAddr, strconv.Itoa(js.MasterPort))))
		}
		fmt.Fprintln(bw)
		writeJobState(bw, js, r.MadeAt)
		rows := make([][]string, 0, len(js.Nodes))
		for _, n := range js.Nodes {
			pid := "-"
			if n.PID > 0 {
				pid = "pid " + strconv.Itoa(n.PID)
			}
			what := n.Process
			switch n.Process {
			case reconcile.ProcessRunning:
				what = sty.create.Render("running") + " for " + (time.Duration(n.UptimeSeconds) * time.Second).String()
			case reconcile.ProcessExited:
				what = sty.fail.Render("exited")
				switch {
				case n.End != nil && n.End.Lost:
					what += " without an exit status"
				case n.ExitStatus != nil:
					what += fmt.Sprintf(" with status %d", *n.ExitStatus)
				}
			case reconcile.ProcessUnknown:
				what = sty.replace.Render("unknown") + ": " + clean(n.Detail)
			case reconcile.ProcessNotStarted:
				what = "not started"
			}
			rows = append(rows, []string{"node " + strconv.Itoa(n.Rank), clean(n.Host), gpuWords(n.GPUs), pid, what})
		}
		writeColumns(bw, "  ", rows)
		for _, n := range js.Nodes {
			if len(n.LogTail) == 0 {
				continue
			}
			fmt.Fprintf(bw, "  node %d's log ends with:\n", n.Rank)
			for _, l := range n.LogTail {
				fmt.Fprintf(bw, "    | %s\n", clean(l))
			}
		}
		if len(js.Runs) > 0 {
			writeRunHistory(bw, js.Runs)
		}
	}
	for _, js := range r.Jobs {
		write(js, false)
	}
	for _, js := range r.Leftovers {
		write(js, true)
	}
	return bw.Flush()
}

// writeJobState says why a job is in its state, what its restart budgets
// have left, how it last failed, and what state has not recorded yet.
func writeJobState(bw *bufio.Writer, js reconcile.JobStatus, now time.Time) {
	failedNow := js.State == state.JobFailed || js.State == state.JobLost
	if js.Message != "" && !failedNow {
		line := js.Message
		if js.State == state.JobSucceeded && js.EndedAt != nil {
			line += fmt.Sprintf(" (ended%s, ran %s)", agoWords(js.EndedAt, now), shortDuration(js.EndedAt.Sub(js.LaunchedAt)))
		}
		fmt.Fprintf(bw, "  %s\n", clean(line))
	}
	if js.Status == state.JobRunning && (js.State == state.JobSucceeded || failedNow) {
		fmt.Fprintf(bw, "  state records it running; the next apply records how it ended\n")
	}
	if b := js.Restarts; b != nil {
		fmt.Fprintf(bw, "  restarts %s after failures, %s after lost nodes\n", budgetWords(b.AfterFailures), budgetWords(b.AfterLost))
	}
	if f := js.LastFailure; f != nil {
		line := "last failure: "
		if f.EndReason != "" {
			line += f.EndReason + ": "
		}
		if f.Message != "" {
			line += f.Message
		} else {
			line += f.State
		}
		line += " (run " + f.RunID
		if f.EndedAt != nil {
			line += ", ended" + agoWords(f.EndedAt, now)
		}
		fmt.Fprintf(bw, "  %s)\n", clean(line))
	}
	if js.Error != "" && !strings.Contains(js.Message, js.Error) && (js.LastFailure == nil || !strings.Contains(js.LastFailure.Message, js.Error)) {
		fmt.Fprintf(bw, "  error: %s\n", clean(js.Error))
	}
	switch {
	case failedNow && js.EndReason == "" && strings.HasPrefix(js.Message, launchFailed):
		// A launch that failed before its processes ran is launched
		// again by the next apply (launch_incomplete), --replace or not.
		fmt.Fprintf(bw, "  the next apply launches it again (gpulayer plan: launch_incomplete)\n")
	case failedNow:
		fmt.Fprintf(bw, "  run it again with: gpulayer apply --replace job.%s\n", clean(js.Job))
	}
}

// launchFailed begins the message of a job whose launch failed before its
// processes ran (reconcile.JudgeJob).
const launchFailed = "the launch failed: "

// budgetWords is "1/2", or "1/unlimited".
func budgetWords(b reconcile.Budget) string {
	if b.Allowed < 0 {
		return strconv.Itoa(b.Used) + "/unlimited"
	}
	return strconv.Itoa(b.Used) + "/" + strconv.Itoa(b.Allowed)
}

// writeRunHistory lists a job's runs, oldest first: its id, when it was
// launched and ended, how it ended and how each node ended.
func writeRunHistory(bw *bufio.Writer, runs []reconcile.RunStatus) {
	fmt.Fprintln(bw, "  runs, oldest first:")
	rows := make([][]string, 0, len(runs))
	for _, run := range runs {
		id := clean(run.RunID)
		if run.Current {
			id += " (current)"
		}
		ended := "-"
		if run.EndedAt != nil {
			ended = "ended " + run.EndedAt.UTC().Format(time.RFC3339)
		}
		how := run.State
		if run.EndReason != "" && run.EndReason != run.State {
			how += " (" + run.EndReason + ")"
		}
		nodes := make([]string, 0, len(run.Nodes))
		for _, e := range run.Nodes {
			nodes = append(nodes, fmt.Sprintf("node %d %s", e.Rank, endWords(e)))
		}
		rows = append(rows, []string{id, "launched " + run.LaunchedAt.UTC().Format(time.RFC3339), ended, clean(how), clean(strings.Join(nodes, ", "))})
	}
	writeColumns(bw, "    ", rows)
}
