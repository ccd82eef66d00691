package apply

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// TestHostStopsSweepOncePerKernel: the hosts of a run whose launches
// recorded one boot id, pid namespace and login are swept by the first
// of them, told every one of their ranks; a host of another namespace,
// or whose namespace is not known, sweeps for itself; a node of an old
// gpulayer (no reach) makes its kernel's sweep look for the run id.
func TestHostStopsSweepOncePerKernel(t *testing.T) {
	proc := func(pid int, boot, ns string) *state.Process {
		return &state.Process{PID: pid, StartTime: 1, BootID: boot, PIDNamespace: ns}
	}
	reach := &state.Reach{}
	node := func(rank int, host string, p *state.Process) state.Node {
		return state.Node{Rank: rank, Host: host, Address: "127.0.0.1", Process: p, Reach: reach}
	}
	targets := map[string]ssh.Target{}
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		targets[h] = ssh.Target{Address: "127.0.0.1", User: "u"}
	}
	targets["e"] = ssh.Target{Address: "127.0.0.1", User: "other"}
	nodes := []state.Node{
		node(0, "a", proc(10, "boot1", "pid:[1]")),
		node(1, "b", proc(11, "boot1", "pid:[1]")),
		node(2, "c", proc(12, "boot1", "pid:[2]")),
		node(3, "d", proc(13, "boot1", "")),
		node(4, "b", proc(14, "boot1", "pid:[1]")),
		node(5, "e", proc(15, "boot1", "pid:[1]")),
	}
	got := map[string]hostStop{}
	for _, h := range hostStops(targets, "r1", nodes, 0) {
		got[h.host] = h
	}
	for host, want := range map[string]struct {
		noSweep bool
		ranks   []int
	}{
		"a": {false, []int{0, 1, 4}}, "b": {true, []int{1, 4}}, "c": {false, []int{2}}, "d": {false, []int{3}}, "e": {false, []int{5}},
	} {
		h := got[host]
		if h.stop.NoSweep != want.noSweep || !slices.Equal(h.stop.Ranks, want.ranks) {
			t.Errorf("host %s: no sweep %v, ranks %v; want %v, %v", host, h.stop.NoSweep, h.stop.Ranks, want.noSweep, want.ranks)
		}
	}
	if got["b"].stop.PID != 14 || got["a"].stop.PID != 10 {
		t.Errorf("each host stops its own leader: a %d, b %d", got["a"].stop.PID, got["b"].stop.PID)
	}

	nodes[1].Reach = nil // launched by a gpulayer before GPULAYER_NODE_ID
	for _, h := range hostStops(targets, "r1", nodes, 0) {
		if (h.host == "a" || h.host == "b") && h.stop.Ranks != nil {
			t.Errorf("host %s sweeps ranks %v, want the run id", h.host, h.stop.Ranks)
		}
	}
}
