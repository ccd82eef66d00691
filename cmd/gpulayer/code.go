package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// readCode reads the code directory of every job with a code block: the
// plan compares their hashes, apply sends the trees. A tree that cannot be
// sent (a link out of it, a FIFO, too large) fails the plan, naming the
// path, every job's problem at once.
func readCode(jobs []*config.Job) (map[string]*state.CodeSpec, map[string]*codetree.Tree, error) {
	specs := map[string]*state.CodeSpec{}
	trees := map[string]*codetree.Tree{}
	var errs []error
	for _, j := range jobs {
		if j.Code == nil {
			continue
		}
		c := j.Code
		t, err := codetree.Read(c.Dir, codetree.Options{Exclude: c.Exclude, MaxSize: c.MaxSize})
		if err != nil {
			errs = append(errs, fmt.Errorf("job %q: code (%s): %w", j.Name, c.Range, err))
			continue
		}
		trees[j.Name] = t
		specs[j.Name] = codeSpec(c.Dir, c.Exclude, c.MaxSize, t)
	}
	return specs, trees, errors.Join(errs...)
}

func codeSpec(dir string, exclude []string, maxSize int64, t *codetree.Tree) *state.CodeSpec {
	return &state.CodeSpec{Source: dir, Exclude: slices.Clone(exclude), MaxSize: maxSize, Hash: t.Hash,
		Files: len(t.Files), Size: t.Size, Manifest: t.Manifest()}
}

// readSpecCode reads again the code of a saved plan's jobs, as the plan
// read it, and says which jobs' code changed since: such a plan is stale.
func readSpecCode(specs map[string]state.JobSpec) (map[string]*codetree.Tree, []string, error) {
	trees := map[string]*codetree.Tree{}
	var stale []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		c := specs[name].Code
		if c == nil {
			continue
		}
		t, err := codetree.Read(c.Source, codetree.Options{Exclude: c.Exclude, MaxSize: c.MaxSize})
		if err != nil {
			errs = append(errs, fmt.Errorf("job %q: code: %w", name, err))
			continue
		}
		trees[name] = t
		stale = append(stale, reconcile.StaleCode(name, c, t.Hash)...)
	}
	return trees, stale, errors.Join(errs...)
}
