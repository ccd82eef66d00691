// Package config is the gpulayer language: it reads every *.hcl and
// *.hcl.json file of a directory, resolves variables, locals and references,
// and returns a Config together with hcl.Diagnostics that carry the source
// range of every problem, all of them from one run.
//
// Files of the package: load.go (Load and its file discovery), variables.go
// (declarations, value sources and their precedence, validation rules),
// locals.go, blocks.go (ssh, policy, fleet, host, gcp, job), env.go (the
// names a job's env may use: those sh can export), references.go
// (what each block may refer to, "Did you mean" for unknown names),
// decode.go (typed attribute reading), address.go, functions.go,
// diagnostics.go (Terraform-shaped text and the JSON report; colour only when
// the caller asks; at most 20 per file), format.go (canonical formatting and
// its unified diff), diff.go (the line diff behind it), source.go (how a
// file is read: regular, bounded, text), nesting.go (the depth limit checked
// before any parser sees a text), sensitive.go (keeping sensitive values out
// of diagnostics).
//
// It does no I/O beyond reading the files it is given (configuration files,
// variable files, and files named by file()), each bounded in size and
// never a pipe or a device. It knows nothing of SSH, probing or placement.
package config
