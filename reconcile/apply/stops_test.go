package apply

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// TestHostStopsSweepOncePerKernel: the hosts of a run whose launches
// recorded one boot id, pid namespace and login stop their own nodes
// without the sweep, and one sweep, on the first of them whose stop
// succeeded, looks for the nodes of all that did, and lists the members
// of their process groups (never for a node whose machine did not
// answer); a host of another namespace or login, or
// whose namespace is not known, or reached at another address, sweeps
// for itself; so does the host of a
// node of an old gpulayer (no reach), for the run id.
func TestHostStopsSweepOncePerKernel(t *testing.T) {
	proc := func(pid int, boot, ns string) *state.Process {
		return &state.Process{PID: pid, StartTime: 1, BootID: boot, PIDNamespace: ns}
	}
	reach := &state.Reach{}
	node := func(rank int, host string, p *state.Process) state.Node {
		return state.Node{Rank: rank, Host: host, Address: "127.0.0.1", Process: p, Reach: reach}
	}
	targets := map[string]ssh.Target{}
	for _, h := range []string{"a", "b", "c", "d"} {
		targets[h] = ssh.Target{Address: "127.0.0.1", User: "u"}
	}
	targets["e"] = ssh.Target{Address: "127.0.0.1", User: "other"}
	// f repeats a's boot id and namespace from another address: its word
	// alone does not put it in a's kernel.
	targets["f"] = ssh.Target{Address: "10.0.0.6", User: "u"}
	nodes := []state.Node{
		node(0, "a", proc(10, "boot1", "pid:[1]")),
		node(1, "b", proc(11, "boot1", "pid:[1]")),
		node(2, "c", proc(12, "boot1", "pid:[2]")),
		node(3, "d", proc(13, "boot1", "")),
		node(4, "b", proc(14, "boot1", "pid:[1]")),
		node(5, "e", proc(15, "boot1", "pid:[1]")),
		node(6, "f", proc(16, "boot1", "pid:[1]")),
	}
	nodes[6].Address = "10.0.0.6"
	stops := hostStops(targets, "r1", nodes, 0)
	got := map[string]hostStop{}
	for _, h := range stops {
		got[h.host] = h
	}
	for host, want := range map[string]struct {
		noSweep bool
		ranks   []int
	}{
		"a": {true, []int{0}}, "b": {true, []int{1, 4}}, "c": {false, []int{2}}, "d": {false, []int{3}}, "e": {false, []int{5}}, "f": {false, []int{6}},
	} {
		h := got[host]
		if h.stop.NoSweep != want.noSweep || !slices.Equal(h.stop.Ranks, want.ranks) {
			t.Errorf("host %s: no sweep %v, ranks %v; want %v, %v", host, h.stop.NoSweep, h.stop.Ranks, want.noSweep, want.ranks)
		}
	}
	if got["b"].stop.PID != 14 || got["a"].stop.PID != 10 {
		t.Errorf("each host stops its own leader: a %d, b %d", got["a"].stop.PID, got["b"].stop.PID)
	}
	for _, c := range []struct {
		down   map[string]bool
		host   string
		ranks  []int
		groups []int
	}{
		{map[string]bool{}, "a", []int{0, 1, 4}, []int{10, 11, 14}},
		{map[string]bool{"a": true}, "b", []int{1, 4}, []int{11, 14}},
	} {
		sweeps := kernelSweeps(stops, c.down)
		if len(sweeps) != 1 || sweeps[0].host != c.host || !slices.Equal(sweeps[0].stop.Ranks, c.ranks) || sweeps[0].stop.NoSweep || sweeps[0].stop.PID != 0 {
			t.Errorf("down %v: sweeps %+v, want one on %s for %v", c.down, sweeps, c.host, c.ranks)
			continue
		}
		// The sweep lists the members of every node's group, which the
		// machines' own stops signalled but did not list.
		var groups []int
		for _, g := range sweeps[0].stop.Groups {
			if g.StartTime != 1 {
				t.Errorf("down %v: group %d with start time %d, want the launch's (1)", c.down, g.PID, g.StartTime)
			}
			groups = append(groups, g.PID)
		}
		if !slices.Equal(groups, c.groups) {
			t.Errorf("down %v: the sweep lists groups %v, want %v", c.down, groups, c.groups)
		}
	}
	if sweeps := kernelSweeps(stops, map[string]bool{"a": true, "b": true}); len(sweeps) != 0 {
		t.Errorf("with every machine of the kernel down: sweeps %+v", sweeps)
	}

	nodes[1].Reach = nil // launched by a gpulayer before GPULAYER_NODE_ID
	stops = hostStops(targets, "r1", nodes, 0)
	for _, h := range stops {
		if h.host == "b" && (h.stop.NoSweep || h.stop.Ranks != nil) || h.host == "a" && h.stop.NoSweep {
			t.Errorf("host %s: no sweep %v, ranks %v; want its own sweep (b: for the run id)", h.host, h.stop.NoSweep, h.stop.Ranks)
		}
	}
	if sweeps := kernelSweeps(stops, map[string]bool{}); len(sweeps) != 0 {
		t.Errorf("sweeps %+v, want none: no two machines of the kernel left it out", sweeps)
	}
}
