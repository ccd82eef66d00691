// Package ssh runs commands on remote machines over SSH for gpulayer.
//
// A Pool dials each host once and runs every later command for that host
// as a new session on the same connection (Targets with the same user,
// address, port and bastion share it), with at most a few sessions at once
// per connection (OpenSSH's sshd allows 10 by default), a bound on
// concurrent dials, retries with backoff when sshd drops a burst of new
// connections (its MaxStartups), a bound on the TCP connect and the SSH
// handshake together, keepalives, and per-command deadlines taken from a
// context. Every error of Run and WriteFile is a *HostError naming the
// host.
//
// Authentication uses identity files, then the SSH agent's other keys, as
// OpenSSH orders them; an encrypted identity file is skipped with advice to
// load it into the agent, since nothing here prompts for a passphrase.
// Host keys are checked against known_hosts (the user's file and, by
// default, the system's), strictly unless a Target says "accept-new", which
// records the key of a host seen for the first time. A changed host key is
// always refused. Host certificates are checked against known_hosts'
// @cert-authority lines (principal, validity, revocation). The pool never
// accepts a host key it cannot check.
//
// A command whose context ends is sent SIGTERM and its session closed,
// but sshd delivers signals only to users other than root and does not
// kill a command without a pty when its session closes: callers wrap slow
// commands in the remote `timeout` utility as well (the probe does).
//
// This package knows nothing of jobs, fleets or policies: it takes a
// Target and a command string. Values that came from a machine or a file
// must be passed through Quote before they are placed in a command.
//
// Subpackages: sshtest is an in-process SSH server for tests and the
// sandbox; sshdtest starts OpenSSH's sshd for end-to-end tests.
package ssh
