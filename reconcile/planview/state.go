package planview

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

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
