//go:build !unix

package main

import "os/exec"

// killGroupOnCancel leaves cmd to exec's default, killing the process
// alone: process groups are a Unix idea. cmd.WaitDelay still bounds the
// wait for its output.
func killGroupOnCancel(*exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
