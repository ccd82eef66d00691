// Package config is the gpulayer language: it reads every *.hcl and
// *.hcl.json file of a directory, resolves variables, locals and references,
// and returns a Config together with hcl.Diagnostics that carry the source
// range of every problem, all of them from one run.
//
// Files of the package: load.go (Load and its file discovery), variables.go
// (declarations, value sources and their precedence, validation rules),
// locals.go, blocks.go (ssh, policy, fleet, host, gcp, job), references.go
// (what each block may refer to, "Did you mean" for unknown names),
// decode.go (typed attribute reading), address.go, functions.go,
// diagnostics.go (Terraform-shaped text and the JSON report; colour only when
// the caller asks), format.go (canonical formatting and its unified diff).
//
// It does no I/O beyond reading the files it is given (configuration files,
// variable files, and files named by file()). It knows nothing of SSH,
// probing or placement.
package config
