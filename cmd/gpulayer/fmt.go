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
*.hcl.json files are left alone.

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
	files, err := fmtFiles(opts.paths, opts.recursive)
	if err != nil {
		return err
	}
	result := fmtResult{Changed: []string{}}
	var diags hcl.Diagnostics
	sources := map[string]*hcl.File{}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read file", Detail: err.Error()})
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
			fmt.Fprintln(io.Out, name)
			if opts.diff {
				fmt.Fprint(io.Out, config.UnifiedDiff(name, src, out))
			}
		}
		if !opts.check {
			info, err := os.Stat(name)
			if err == nil {
				err = os.WriteFile(name, out, info.Mode().Perm())
			}
			if err != nil {
				return fmt.Errorf("writing %s: %w", name, err)
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
// hidden ones such as .git), sorted and without repeats.
func fmtFiles(paths []string, recursive bool) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	addFile := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("fmt: %w", err)
		}
		if !info.IsDir() {
			addFile(p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && (!recursive || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".hcl") && !strings.HasPrefix(d.Name(), ".") {
				addFile(path)
			}
			return nil
		})
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("fmt: reading %s: %w", pe.Path, pe.Err)
			}
			return nil, fmt.Errorf("fmt: %w", err)
		}
	}
	sort.Strings(files)
	return files, nil
}
