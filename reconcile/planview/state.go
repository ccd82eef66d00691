package planview

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
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
	case state.JobRunning:
		return sty.create.Render(s)
	case state.JobFailed:
		return sty.fail.Render(s)
	}
	return sty.replace.Render(s)
}

// Status writes what `gpulayer status` found: each job's nodes with their
// processes (running for how long, or how they ended).
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
		fmt.Fprintf(bw, "%s  %s  run %s", sty.bold.Render(title), statusWord(js.Status, sty), clean(js.RunID))
		if js.MasterAddr != "" {
			fmt.Fprintf(bw, "  master %s", clean(net.JoinHostPort(js.MasterAddr, strconv.Itoa(js.MasterPort))))
		}
		fmt.Fprintln(bw)
		if js.Error != "" {
			fmt.Fprintf(bw, "  error: %s\n", clean(js.Error))
		}
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
				if n.ExitStatus != nil {
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
	}
	for _, js := range r.Jobs {
		write(js, false)
	}
	for _, js := range r.Leftovers {
		write(js, true)
	}
	return bw.Flush()
}
