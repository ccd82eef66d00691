// Package ssh runs commands on remote machines over SSH for gpulayer.
//
// A Pool dials each host once and runs every later command for that host
// as a new session on the same connection, with at most a few sessions at
// once per connection (OpenSSH's sshd allows 10 by default), a bound on
// concurrent dials, retries with backoff when sshd drops a burst of new
// connections (its MaxStartups), a bound on the TCP connect and on the SSH
// handshake, keepalives, and per-command deadlines taken from a context.
//
// Authentication uses the SSH agent and identity files. Host keys are
// checked against known_hosts, strictly by default; "accept-new" records
// the key of a host seen for the first time. A changed host key is always
// refused. The pool never accepts a host key it cannot check.
//
// A command that is cancelled through its context is sent a signal and its
// session closed; without a pty the remote sshd does not kill a command
// when the session closes, so callers that run slow commands wrap them in
// the remote `timeout` utility as well (the probe does).
//
// This package knows nothing of jobs, fleets or policies: it takes a
// Target and a command string. Values that came from a machine or a file
// must be passed through Quote before they are placed in a command.
package ssh
