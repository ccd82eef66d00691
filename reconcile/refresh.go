package reconcile

import (
	"context"
	"fmt"
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
	watch := StateWatches(st)
	for i := range machines {
		machines[i].Watch = watch[machines[i].Name]
	}
	return probe.Fleet(ctx, r, machines, opts), nil
}

// StateWatches are the processes state records (jobs' and leftovers'),
// by host, in pid order.
func StateWatches(st *state.State) map[string][]probe.Watch {
	out := map[string][]probe.Watch{}
	if st == nil {
		return out
	}
	for _, jobs := range [][]state.Job{st.Jobs, st.Leftovers} {
		for _, j := range jobs {
			for _, n := range j.Nodes {
				if n.Process == nil || n.Process.PID <= 0 {
					continue
				}
				w := probe.Watch{PID: n.Process.PID, Node: fmt.Sprintf("%s/%s/node-%d", j.Name, j.RunID, n.Rank),
					Stall: j.Spec.Lifecycle.StallTimeout > 0}
				if !slices.Contains(out[n.Host], w) {
					out[n.Host] = append(out[n.Host], w)
				}
			}
		}
	}
	for h := range out {
		slices.SortFunc(out[h], func(a, b probe.Watch) int { return a.PID - b.PID })
	}
	return out
}
