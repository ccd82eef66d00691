package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/function"
)

// LoadOptions is what Load needs from outside the directory: variable
// values from the command line and the environment. Load never reads the
// process environment itself, so a test passes exactly what it means.
type LoadOptions struct {
	// Vars are the --var and --var-file flags, in command-line order: a
	// later one wins over an earlier one.
	Vars []VarArg
	// Environ is the environment as os.Environ returns it; only
	// GPULAYER_VAR_<name> entries are used.
	Environ []string
	// UnsetVariablesUnknown gives a required variable that was given no
	// value an unknown value of its type instead of an error, as terraform
	// validate does, so that a configuration can be checked without its
	// secrets (a CI job): everything computed from such a variable is
	// checked as far as it can be without its value, and its validation
	// rules are skipped. Only validate sets it; the Config is then for
	// reporting, never for planning, since what depends on those variables
	// holds no value.
	UnsetVariablesUnknown bool
}

// VarArg is one --var or --var-file flag.
type VarArg struct {
	// Assignment is "name=value" from --var; empty for a --var-file.
	Assignment string
	// File is the path of a --var-file, relative to the working directory.
	File string
}

// Config file suffixes. Variable files end in .auto.vars.hcl and are not
// configuration, even though they also end in .hcl.
const (
	suffixNative       = ".hcl"
	suffixJSON         = ".hcl.json"
	suffixAutoVars     = ".auto.vars.hcl"
	suffixAutoVarsJSON = ".auto.vars.hcl.json"
)

// rootSchema is the top level of a configuration file.
var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "ssh", LabelNames: []string{"name"}},
		{Type: "fleet", LabelNames: []string{"name"}},
		{Type: "policy", LabelNames: []string{"name"}},
		{Type: "job", LabelNames: []string{"name"}},
		{Type: "backend", LabelNames: []string{"kind"}},
	},
}

// loader holds the state of one Load call.
type loader struct {
	dir    string
	opts   LoadOptions
	parser *hclparse.Parser
	funcs  map[string]function.Function
	diags  hcl.Diagnostics
	cfg    *Config
	// secrets are the sensitive values seen so far, kept out of every
	// diagnostic and snippet.
	secrets *secrets
	// unparsed are files read but refused before parsing (nested too
	// deep), kept so that their diagnostic shows the line.
	unparsed map[string]*hcl.File
	// pieced are the files parsed in pieces (parseInPieces), and literal
	// their literal hosts, by body.
	pieced  map[string]bool
	literal map[*hclsyntax.Body]*literalHost

	vars   *namespace
	locals *namespace
	sshs   *namespace
	pols   *namespace

	// locationUnknown is set when a region or zone failed to evaluate.
	locationUnknown bool
}

func (l *loader) add(diags ...*hcl.Diagnostic) { l.diags = append(l.diags, diags...) }

// Load reads every *.hcl and *.hcl.json file of dir, resolves variables,
// locals and references, and checks everything it can. It always returns a
// Config holding what could be read, and the diagnostics of every problem
// found, sorted by file and position. The Config is usable only when the
// diagnostics hold no error.
func Load(dir string, opts LoadOptions) (*Config, hcl.Diagnostics) {
	l := &loader{
		dir:      dir,
		opts:     opts,
		parser:   hclparse.NewParser(),
		funcs:    functions(dir),
		cfg:      &Config{Dir: dir},
		secrets:  newSecrets(),
		unparsed: map[string]*hcl.File{},
		pieced:   map[string]bool{},
		literal:  map[*hclsyntax.Body]*literalHost{},
	}
	blocks, syntaxOK := l.readFiles()
	if !syntaxOK {
		// As Terraform does: a file that does not parse would make every
		// later check report consequences of the same typo.
		return l.finish()
	}
	l.variables(blocks["variable"])
	l.localValues(blocks["locals"])
	l.sshBlocks(blocks["ssh"])
	l.policies(blocks["policy"])
	l.fleets(blocks["fleet"])
	l.jobs(blocks["job"])
	l.backends(blocks["backend"])
	l.crossChecks()
	return l.finish()
}

// finish orders the diagnostics, redacts sensitive values from them and
// from the sources their snippets are cut from, and caps them per file.
func (l *loader) finish() (*Config, hcl.Diagnostics) {
	files := map[string]*hcl.File{}
	for name, f := range l.unparsed {
		files[name] = f
	}
	for name, f := range l.parser.Files() {
		if len(l.diags) > 0 && l.pieced[name] {
			// Parsed in pieces, it has no Nav to name the block a
			// diagnostic is in: parsed whole, it has (and parses cleanly,
			// as its pieces did).
			f, _ = hclsyntax.ParseConfig(f.Bytes, name, hcl.InitialPos)
		}
		if len(l.diags) == 0 {
			// The syntax tree serves only to name the block a diagnostic
			// is in; with none to render, the source is all that is kept,
			// and the tree of a large configuration (11 MiB for 5,000
			// hosts) is not held through the plan.
			f = &hcl.File{Bytes: f.Bytes}
		}
		files[name] = f
	}
	l.cfg.Files = l.secrets.mask(files)
	sortDiagnostics(l.diags)
	l.secrets.scrub(l.diags)
	return l.cfg, capPerFile(l.diags)
}

// decoder is a decoder for scope s that records the sensitive values it
// evaluates.
func (l *loader) decoder(s *scope) *decoder {
	d := newDecoder(s, l.funcs)
	d.secrets = l.secrets
	return d
}

// readFiles parses the configuration files of dir in lexical order and
// returns their top-level blocks by type, in file then declaration order.
// syntaxOK is false when a file does not parse.
func (l *loader) readFiles() (blocks map[string]hcl.Blocks, syntaxOK bool) {
	blocks = map[string]hcl.Blocks{}
	syntaxOK = true
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration directory",
			Detail:   fmt.Sprintf("Reading %s: %s.", l.dir, pathError(err)),
		})
		return blocks, true
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !isConfigFile(name) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail:   fmt.Sprintf("%s holds no *.hcl or *.hcl.json file. Run gpulayer in the directory of your configuration, or name it: gpulayer validate DIR.", l.dir),
		})
		return blocks, true
	}
	for _, name := range names {
		path := filepath.Join(l.dir, name)
		f, diags := l.parseFile(path, "Cannot read configuration file")
		l.add(diags...)
		if diags.HasErrors() {
			syntaxOK = false
		}
		if f == nil || !syntaxOK {
			continue
		}
		content, diags := f.Body.Content(rootSchema)
		l.add(diags...)
		for _, b := range content.Blocks {
			blocks[b.Type] = append(blocks[b.Type], b)
		}
	}
	return blocks, syntaxOK
}

// parseFile reads a configuration or variable file and parses it, as
// native or JSON syntax by its suffix. A file that ReadSource refuses, or
// that nests too deep for the parser, gets one diagnostic (summary says
// what the file was meant to be) and is not parsed.
func (l *loader) parseFile(path, summary string) (*hcl.File, hcl.Diagnostics) {
	src, err := ReadSource(path)
	if err != nil {
		return nil, hcl.Diagnostics{readDiagnostic(summary, err)}
	}
	if strings.HasSuffix(path, ".json") {
		if off := jsonNestingTooDeep(src, true); off >= 0 {
			l.unparsed[path] = &hcl.File{Bytes: src}
			return nil, hcl.Diagnostics{nestingDiagnostic(src, off, path, path)}
		}
		return l.parser.ParseJSON(src, path)
	}
	if off := nestingTooDeep(src, syntaxConfig); off >= 0 {
		l.unparsed[path] = &hcl.File{Bytes: src}
		return nil, hcl.Diagnostics{nestingDiagnostic(src, off, path, path)}
	}
	if len(src) >= piecesFrom {
		if f, ok := parseInPieces(src, path, pieceSize(len(src)), l.literal); ok {
			l.parser.AddFile(path, f)
			l.pieced[path] = true
			return f, nil
		}
	}
	return l.parser.ParseHCL(src, path)
}

func isConfigFile(name string) bool {
	if strings.HasSuffix(name, suffixAutoVars) || strings.HasSuffix(name, suffixAutoVarsJSON) {
		return false
	}
	return strings.HasSuffix(name, suffixNative) || strings.HasSuffix(name, suffixJSON)
}

func isAutoVarsFile(name string) bool {
	return strings.HasSuffix(name, suffixAutoVars) || strings.HasSuffix(name, suffixAutoVarsJSON)
}

// sortDiagnostics orders diagnostics by file and position, those without a
// range first, so that output is the same on every run.
func sortDiagnostics(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Byte != b.Start.Byte:
			return a.Start.Byte < b.Start.Byte
		}
		return false
	})
}

// duplicate is the diagnostic for a second declaration of a name.
func duplicate(kind, name string, first, again hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + kind,
		Detail: fmt.Sprintf("%s %s named %q is already declared at %s:%d. Names must be unique; rename or remove one of them.",
			article(kind), kind, name, first.Filename, first.Start.Line),
		Subject: again.Ptr(),
	}
}

// article is "An" before a kind that is read with a vowel sound ("an ssh
// block", "an input variable"), else "A".
func article(kind string) string {
	if strings.HasPrefix(kind, "ssh") || strings.ContainsAny(kind[:1], "aeiou") {
		return "An"
	}
	return "A"
}

// blockName is the label of a block; the schema guarantees it has one.
func blockName(b *hcl.Block) (string, hcl.Range) {
	if len(b.Labels) == 0 {
		return "", b.DefRange
	}
	return b.Labels[0], b.LabelRanges[0]
}
