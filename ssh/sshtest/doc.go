// Package sshtest is a real SSH server, on golang.org/x/crypto/ssh, that
// runs commands on this machine: for tests of code that uses SSH, and for
// `gpulayer sandbox`, which serves hundreds of simulated machines from one
// process.
//
// A Server listens on 127.0.0.1, accepts the public keys it is given, and
// runs each "exec" request with a shell (`sh -c`) in its own process
// group, with the server's environment and working directory, streaming
// stdin, stdout and stderr and returning the exit status or signal, as
// OpenSSH's sshd does. A command whose session closes before it exits is
// killed with its process group, and so are those still running when the
// server stops. Options.Runner replaces the shell process with a
// CommandRunner (the sandbox interprets commands in-process with one); a
// signal or a closed session then cancels the command's context. It offers
// no shells, ptys or subsystems; TCP forwarding
// (for use as a bastion) only when asked. Options.Stall makes it stop
// answering at one step of a session (channel-open, exec), and
// Agent.Stall an agent stop answering, for tests of clients' timeouts.
//
// It must never listen beyond the loopback interface unless a caller hands
// it such a listener: it authenticates keys but is not hardened.
package sshtest
