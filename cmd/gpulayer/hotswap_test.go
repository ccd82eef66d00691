package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestALostMachineIsReplacedNextToTheSurvivors: one machine of a running
// two-node gang stops answering for longer than lost_after. The restart
// keeps the surviving node on its machine, GPUs and rank (and, node 0
// surviving, the rendezvous), and only the lost node moves, to the
// closest machine the policy allows; the old run is stopped on the lost
// machine once it answers again.
func TestALostMachineIsReplacedNextToTheSurvivors(t *testing.T) {
	sb, dir := sandboxJobs(t, 4, `
job "pair" {
  nodes         = 2
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "1s"
  command       = ["sleep", "300"]
  restart {
    lost_after = "2s"
  }
}
`)
	mustApply(t, dir)
	first := loadState(t, dir).Job("pair")
	kept, down := first.Nodes[0], first.Nodes[1]
	sb.SetReachable(down.Host, false)
	mustApply(t, dir) // within lost_after: unknown, left alone
	time.Sleep(2100 * time.Millisecond)
	// The old run cannot be stopped on the machine that is down: apply
	// says so (exit 1) and keeps it as a leftover.
	code, out, errOut := runCmd(t, "apply", dir, "--auto-approve")
	if !strings.Contains(out, "node_replaced: replace node 1: machine "+down.Host+" lost; ") || !strings.Contains(out, "1 replaced") {
		t.Fatalf("lost: exit %d\n%s%s", code, out, errOut)
	}
	again := loadState(t, dir).Job("pair")
	if again.RunID == first.RunID || again.LostRestarts != 1 || len(again.Nodes) != 2 {
		t.Fatalf("restarted: %+v", again)
	}
	n0, n1 := again.Nodes[0], again.Nodes[1]
	if n0.Rank != 0 || n0.Host != kept.Host || !slices.Equal(n0.GPUs, kept.GPUs) || again.MasterAddr != first.MasterAddr {
		t.Errorf("survivor moved: was %s GPUs %v (master %s), now %s GPUs %v (master %s)", kept.Host, kept.GPUs, first.MasterAddr, n0.Host, n0.GPUs, again.MasterAddr)
	}
	if n1.Rank != 1 || n1.Host == down.Host || n1.Process == nil {
		t.Errorf("replacement: %+v", n1)
	}
	if !strings.Contains(out, n1.Host+" joins the survivors in ") {
		t.Errorf("the plan does not name the replacement %s:\n%s", n1.Host, out)
	}
	sb.SetReachable(down.Host, true)
	mustApply(t, dir)
	if left := runProcesses(first.RunID); len(left) > 0 {
		t.Errorf("the lost run's processes %v survived once its machine answered", left)
	}
}
