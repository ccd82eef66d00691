// Package sandbox runs a fleet of simulated GPU machines on 127.0.0.1, so
// that gpulayer can be tried, tested and benchmarked end to end without a
// GPU. Each machine is a real SSH server (ssh/sshtest) with its own host
// key, a recorded `nvidia-smi topo -m` (package recordings), a location, a
// torch version, and a fake nvidia-smi on its PATH that answers the probe's
// queries from the recording and reports as busy the GPUs that live
// processes started on that machine use (their CUDA_VISIBLE_DEVICES).
// Commands are interpreted in-process by default (shell.go: the sandbox's
// own sh scripts run in the interpreter and its Go tools, nvidia-smi, are
// called directly, every other program runs as a real process) or run by a
// real POSIX shell (Options.Shell), which reaches the Go tools through
// shims that re-execute the program running the sandbox (tools.go). Processes launched
// on a sandbox machine are real local processes of the current user.
//
// Start writes into a directory a configuration gpulayer can load (an ssh
// block and one fleet per region), a known_hosts file and a client key.
//
// It must not place jobs or parse what the machines print; it only plays
// the machines.
package sandbox
