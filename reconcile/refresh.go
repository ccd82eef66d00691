package reconcile

import (
	"context"
	"slices"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// RefreshFacts probes every declared host once, in one SSH session each, and
// asks each about the processes state says run there, so their liveness
// comes back in the same round trip. An unreachable host is recorded in
// its facts and does not stop the others.
func RefreshFacts(ctx context.Context, r probe.Runner, cfg *config.Config, st *state.State, opts probe.Options) (*facts.Document, error) {
	machines, err := probe.Machines(cfg)
	if err != nil {
		return nil, err
	}
	pids := StatePIDs(st)
	for i := range machines {
		machines[i].PIDs = pids[machines[i].Name]
	}
	return probe.Fleet(ctx, r, machines, opts), nil
}

// StatePIDs are the pids state records, by host, ascending.
func StatePIDs(st *state.State) map[string][]int {
	out := map[string][]int{}
	if st == nil {
		return out
	}
	for _, j := range st.Jobs {
		for _, n := range j.Nodes {
			if n.Process != nil && n.Process.PID > 0 && !slices.Contains(out[n.Host], n.Process.PID) {
				out[n.Host] = append(out[n.Host], n.Process.PID)
			}
		}
	}
	for h := range out {
		slices.Sort(out[h])
	}
	return out
}
