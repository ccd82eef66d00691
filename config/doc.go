// Package config is the gpulayer language: it reads every *.hcl and
// *.hcl.json file of a directory, resolves variables, locals and references,
// and returns a Config together with hcl.Diagnostics that carry the source
// range of every problem, all of them from one run.
//
// It does no I/O beyond reading the files it is given (configuration files,
// variable files, and files named by file()). It knows nothing of SSH,
// probing or placement.
package config
