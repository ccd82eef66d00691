package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCPUOnlyJobRunsOnTheSandboxWithNoGPUVisible: a two-node job with
// gpus_per_node = 0 plans with no GPUs, applies, and each node's command
// sees CUDA_VISIBLE_DEVICES empty, even though the job's env names GPUs
// (gpulayer's variables win); the next plan has no changes.
func TestCPUOnlyJobRunsOnTheSandboxWithNoGPUVisible(t *testing.T) {
	_, dir := sandboxJobs(t, 2, `
job "prep" {
  nodes         = 2
  gpus_per_node = 0
  launcher      = "plain"
  stop_timeout  = "2s"
  env           = { CUDA_VISIBLE_DEVICES = "0,1" }
  command       = ["sh", "-c", "echo CUDA_VISIBLE_DEVICES=[$CUDA_VISIBLE_DEVICES]; while :; do sleep 1; done"]
}
`)
	code, out, errOut := runCmd(t, "plan", dir)
	if code != 0 || !strings.Contains(out, `+ job "prep" will be launched`) || !strings.Contains(out, "2 nodes, no GPUs, plain") ||
		len(regexp.MustCompile(`(?m)^\s+node [01] .*  no GPUs$`).FindAllString(out, -1)) != 2 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "apply", dir, "--auto-approve"); code != 0 || !strings.Contains(out, "Apply complete: 1 launched") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	// Each node's line, [prep RANK HOST] CUDA_VISIBLE_DEVICES=[...]; the
	// log is written by the command, which may not have run yet. logs
	// reads the configuration of the working directory.
	t.Chdir(dir)
	line := regexp.MustCompile(`(?m)^\[prep ([01]) (\S+)\] CUDA_VISIBLE_DEVICES=\[(.*)\]$`)
	var found [][]string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, out, errOut = runCmd(t, "logs", "prep")
		found = line.FindAllStringSubmatch(out, -1)
		if len(found) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 || len(found) != 2 || found[0][2] == found[1][2] {
		t.Fatalf("logs: exit %d, want a line from each node on two machines\n%s%s", code, out, errOut)
	}
	for _, m := range found {
		if m[3] != "" {
			t.Errorf("node %s on %s sees CUDA_VISIBLE_DEVICES=%q, want it empty", m[1], m[2], m[3])
		}
	}
	if code, out, errOut := runCmd(t, "plan", dir, "--detailed-exitcode"); code != 0 || !strings.Contains(out, "No changes.") {
		t.Errorf("plan after apply: exit %d\n%s%s", code, out, errOut)
	}
}
