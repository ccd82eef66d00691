// Package factsview renders a facts.Document for people: a table of hosts
// (location, GPUs, free GPUs, torch, status) followed by each host's error
// and warnings. Every string a machine reported goes through
// iostreams.Sanitize first. The JSON view is the document itself.
//
// It does no I/O beyond writing to the writer it is given, and decides no
// colour rule: the caller says whether colour is on.
package factsview
