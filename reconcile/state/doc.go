// Package state is gpulayer's record of what it did: the jobs it launched
// (placement, processes, run ids), the machines it created, and the facts
// of the last refresh. It is a versioned JSON document (docs/state.md) kept
// by a Backend: a local file by default, written atomically with a backup of
// the previous version and guarded by a lock.
//
// The planner reads a State and never writes one; apply saves after every
// step. This package does no SSH and knows nothing of HCL.
package state
