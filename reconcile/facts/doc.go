// Package facts is what gpulayer knows about each machine after a probe: the
// versioned Facts document (one object per host: location, torch and driver
// versions, GPUs and their processes, the `nvidia-smi topo -m` text beside
// its parsed matrix, process liveness, boot id), the POSIX sh script that
// collects it in one SSH session, and the parser from that script's output.
//
// It is pure: it never runs the script, opens a connection or reads a file;
// reconcile/probe does the I/O. Everything in a Document that a machine
// reported is untrusted text: it is stored verbatim and must go through
// iostreams.Sanitize before it is printed. docs/facts.md documents the format.
package facts
