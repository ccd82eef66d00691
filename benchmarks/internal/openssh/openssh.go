// Package openssh holds what the benchmarks' OpenSSH reference clients
// share: the options of a careful script's ssh.
package openssh

import "github.com/gpulayer/gpulayer/ssh"

// Options are the options of a careful script's `ssh` to t (no config
// file, no prompts, host keys checked against t's known_hosts only, t's
// identities only), which every OpenSSH client of the benchmarks runs with
// (ssh per host, parallel-ssh); port and user are the caller's.
func Options(t ssh.Target) []string {
	args := []string{
		"-F", "/dev/null",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + t.KnownHostsFile,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "IdentitiesOnly=yes",
		"-o", "ConnectTimeout=10",
		"-o", "LogLevel=ERROR",
	}
	for _, id := range t.IdentityFiles {
		args = append(args, "-i", id)
	}
	return args
}
