// Package probe asks every declared machine what it has, over SSH, all at
// once: one session per host running the facts script, at most Parallelism
// hosts at a time, each host's failure recorded in its own facts without
// stopping the others. It turns a configuration into SSH targets and the
// sessions' output into a facts.Document.
//
// It must not parse nvidia-smi text itself (reconcile/facts does), print
// anything (commands render the document), or decide placement.
package probe
