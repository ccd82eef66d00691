package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Code is a job's `code` block: a local directory sent to every machine
// of the job (docs/apply.md). Reading the directory is not the language's
// business: plan does it.
type Code struct {
	// Source is the directory as written, and Dir the same made absolute
	// against the configuration's directory.
	Source string
	Dir    string
	// Exclude are gitignore patterns applied after the source's own
	// .gitignore and .gpulayerignore.
	Exclude []string
	// MaxSize bounds the files' total size, in bytes.
	MaxSize int64
	Range   hcl.Range
}

// Defaults of a job's code and setup.
const (
	DefaultCodeMaxSize  = 512 << 20
	DefaultSetupTimeout = 30 * time.Minute
)

var codeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "source", Required: true}, {Name: "exclude"}, {Name: "max_size"},
}}

// codeAndSetup decodes a job's code block (at most one), setup and
// setup_timeout.
func (l *loader) codeAndSetup(d *decoder, j *Job, a hcl.Attributes, blocks hcl.Blocks) {
	j.SetupTimeout = DefaultSetupTimeout
	d.str(a, "setup", &j.Setup)
	d.duration(a, "setup_timeout", &j.SetupTimeout)
	first := true
	for _, b := range blocks {
		if b.Type != "code" {
			continue
		}
		if !first {
			d.add(duplicateBlock("job", "code", j.Code.Range, b))
			continue
		}
		first = false
		content, diags := b.Body.Content(codeSchema)
		l.add(diags...)
		c := &Code{MaxSize: DefaultCodeMaxSize, Range: b.DefRange}
		ca := content.Attributes
		if d.str(ca, "source", &c.Source) {
			c.Dir = c.Source
			if !filepath.IsAbs(c.Dir) {
				c.Dir = filepath.Join(l.cfg.Dir, c.Dir)
			}
			if abs, err := filepath.Abs(c.Dir); err == nil {
				c.Dir = abs
			}
		}
		d.strList(ca, "exclude", &c.Exclude)
		var size string
		if d.str(ca, "max_size", &size) {
			n, err := ParseSize(size)
			if err != nil {
				d.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid value for max_size",
					Detail:   err.Error() + ".",
					Subject:  ca["max_size"].Expr.Range().Ptr(),
				})
			} else {
				c.MaxSize = n
			}
		}
		j.Code = c
	}
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*(B|KiB|MiB|GiB|KB|MB|GB|k|K|M|G)?$`)

// ParseSize reads a size such as "512MiB", "2GB" or "1048576".
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size; write a number of bytes with a unit, such as \"512MiB\" or \"2GiB\"", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size", s)
	}
	mult := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "k": 1000, "K": 1000, "KB": 1000, "M": 1000 * 1000, "MB": 1000 * 1000, "G": 1000 * 1000 * 1000, "GB": 1000 * 1000 * 1000}[m[2]]
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
