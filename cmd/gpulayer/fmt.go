package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/atomicfile"
	"github.com/gpulayer/gpulayer/internal/iostreams"
)

type fmtOptions struct {
	f         *factory
	paths     []string
	check     bool
	diff      bool
	recursive bool
	json      bool
}

func newCmdFmt(f *factory, runF func(*fmtOptions) error) *cobra.Command {
	opts := &fmtOptions{f: f}
	cmd := &cobra.Command{
		Use:   "fmt [DIR|FILE...]",
		Short: "Rewrite configuration files in the canonical format",
		Long: `fmt rewrites the *.hcl files of each DIR (default: the current directory)
and each FILE named in the canonical layout, and lists the files it changed.
*.hcl.json files are left alone. A file is replaced whole (written beside it,
then renamed), so a failed write leaves it as it was; its mode is kept.
Symbolic links to files are not followed: each is reported and left alone.

Exit status: 0 on success; 1 when a file cannot be read or does not parse;
with --check, 3 when a file is not formatted (nothing is written).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paths = args
			if len(opts.paths) == 0 {
				opts.paths = []string{"."}
			}
			if runF != nil {
				return runF(opts)
			}
			return fmtRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.check, "check", false, "list files that are not formatted and exit 3; write nothing")
	cmd.Flags().BoolVar(&opts.diff, "diff", false, "print the changes as a unified diff")
	cmd.Flags().BoolVar(&opts.recursive, "recursive", false, "also format the files of subdirectories")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as JSON")
	return cmd
}

// fmtResult is what `fmt --json` prints.
type fmtResult struct {
	Changed     []string                  `json:"changed"`
	Diagnostics []config.ReportDiagnostic `json:"diagnostics"`
}

func fmtRun(opts *fmtOptions) error {
	io := opts.f.IO
	files, links, err := fmtFiles(opts.paths, opts.recursive)
	if err != nil {
		return err
	}
	result := fmtResult{Changed: []string{}}
	var diags hcl.Diagnostics
	for _, link := range links {
		diags = append(diags, linkNotFormatted(link))
	}
	sources := map[string]*hcl.File{}
	for _, name := range files {
		src, err := config.ReadSource(name)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read file", Detail: iostreams.Sanitize(err.Error(), false) + "."})
			continue
		}
		out, fd := config.Format(src, name)
		if fd.HasErrors() {
			sources[name] = &hcl.File{Bytes: src}
			diags = append(diags, fd...)
			continue
		}
		if string(out) == string(src) {
			continue
		}
		result.Changed = append(result.Changed, name)
		if !opts.json {
			// Names and lines come from the files: whoever wrote them
			// must not be able to drive the terminal.
			shown := iostreams.Sanitize(name, false)
			fmt.Fprintln(io.Out, shown)
			if opts.diff {
				fmt.Fprint(io.Out, iostreams.Sanitize(config.UnifiedDiff(shown, src, out), true))
			}
		}
		if !opts.check {
			if err := replaceFile(name, out); err != nil {
				return fmt.Errorf("fmt: %w", err)
			}
		}
	}
	if opts.json {
		result.Diagnostics = config.NewReport(diags).Diagnostics
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(result); err != nil {
			return err
		}
	} else if len(diags) > 0 {
		if err := config.WriteDiagnostics(io.ErrOut, diags, sources, config.RenderOptions{Color: io.ColorEnabled()}); err != nil {
			return err
		}
	}
	switch {
	case diags.HasErrors():
		return &exitError{code: 1}
	case opts.check && len(result.Changed) > 0:
		return &exitError{code: 3}
	}
	return nil
}

// fmtFiles lists the files to format: each FILE as named, and the *.hcl
// files of each DIR (of its subdirectories too with recursive, skipping
// hidden ones such as .git), sorted and without repeats. links are the
// symbolic links among them, which fmt does not follow: replacing one
// would break it, and writing through it could change a file outside the
// directory it was given. A DIR named as a link to a directory is read.
func fmtFiles(paths []string, recursive bool) (files, links []string, err error) {
	seen := map[string]bool{}
	add := func(list *[]string, p string) {
		if !seen[p] {
			seen[p] = true
			*list = append(*list, p)
		}
	}
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("fmt: %s", iostreams.Sanitize(err.Error(), false))
		}
		root := p
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err := os.Stat(p); err != nil || !target.IsDir() {
				add(&links, p)
				continue
			}
			root = p + string(filepath.Separator) // walk what the link points to
		} else if !info.IsDir() {
			add(&files, p)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root && (!recursive || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(d.Name(), ".hcl") || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			switch {
			case d.Type().IsRegular():
				add(&files, path)
			case d.Type()&fs.ModeSymlink != 0:
				add(&links, path)
			}
			return nil
		})
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("fmt: reading %s: %w", iostreams.Sanitize(pe.Path, false), pe.Err)
			}
			return nil, nil, fmt.Errorf("fmt: %w", err)
		}
	}
	sort.Strings(files)
	sort.Strings(links)
	return files, links, nil
}

// replaceFile writes data over the regular file at name, keeping its mode,
// through a temporary file renamed over it: a full disk, a file-size limit
// or a crash leaves the old file or the new one, never a cut one. A file
// that became a link since it was listed is refused, not replaced.
func replaceFile(name string, data []byte) error {
	info, err := os.Lstat(name)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file; not written", iostreams.Sanitize(name, false))
	}
	const keep = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if err := atomicfile.Write(name, data, info.Mode()&keep); err != nil {
		return fmt.Errorf("writing %s: %w", iostreams.Sanitize(name, false), err)
	}
	return nil
}

// linkNotFormatted is the warning for a symbolic link fmt leaves alone.
func linkNotFormatted(link string) *hcl.Diagnostic {
	target, err := os.Readlink(link)
	if err != nil {
		target = "a path that cannot be read"
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  "Symbolic link not formatted",
		Detail: fmt.Sprintf("%s is a symbolic link to %s. fmt rewrites only regular files, so that it never replaces a link or writes outside the directory it was given; format the file it points to instead.",
			iostreams.Sanitize(link, false), iostreams.Sanitize(target, false)),
	}
}
