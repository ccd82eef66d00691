// Package ssh runs commands on remote machines over SSH for gpulayer.
//
// A Pool dials each host once and runs every later command for that host
// as a new session on the same connection (Targets share it only when
// they agree on everything that decides trust and identity: user,
// address, port, host key check, known_hosts files, identity files and
// bastion), with at most a few sessions at once
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
// # Limits and timeouts
//
// Every step of a command is bounded by its context, and every step that
// waits on someone else has a bound of its own, so that a hung or hostile
// server, agent or file can hold one host's command at most until its
// context ends, never another host's, and never Close:
//
//   - the TCP connect and the SSH handshake together: Target.ConnectTimeout
//     (DefaultConnectTimeout, 10s); reading known_hosts and the keys
//     before it has the same bound;
//   - opening a session (channel-open) and starting the command (exec):
//     the context; a server that answers neither is left waiting, and the
//     session is closed if it ever answers;
//   - the SSH agent: connecting and each request with its answer, 2s; an
//     agent that leaves a request unanswered is not asked again by the
//     pool (its keys are not offered; identity files still are);
//   - keepalives: Options.Keepalive (15s), three unanswered close the
//     connection; they test the connection, not a session;
//   - a command's output: Options.MaxOutputBytes (64 MiB) each of stdout
//     and stderr;
//   - after a command's context ends, Run waits 250ms for it to wind down;
//   - Close waits at most 5s for the pool's goroutines (closing the
//     connections ends them).
//
// Identity files (at most 1 MiB) and known_hosts files (at most 64 MiB
// each) must be regular files, or links to them: a named pipe, a device
// such as /dev/zero or a directory is refused with an error naming the
// file and the host, before it is read.
//
// This package knows nothing of jobs, fleets or policies: it takes a
// Target and a command string. Values that came from a machine or a file
// must be passed through Quote before they are placed in a command.
//
// Subpackages: sshtest is an in-process SSH server for tests and the
// sandbox; sshdtest starts OpenSSH's sshd for end-to-end tests.
package ssh
