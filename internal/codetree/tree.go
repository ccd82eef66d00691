// Package codetree reads a job's local code directory (the `code` block,
// docs/apply.md): which files it holds once ignore rules apply, their hash
// (what a plan compares and a machine's code directory is named by), a
// manifest of per-file hashes (what `code_changed` counts), and the tar
// stream apply sends. It reads local files only; it never writes.
package codetree

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limits of a tree.
const (
	DefaultMaxSize = 512 << 20
	MaxFiles       = 100_000
	// ignoreFileMax bounds a .gitignore or .gpulayerignore read.
	ignoreFileMax = 1 << 20
)

// maxFiles is MaxFiles, lowered by this package's tests so that the
// refusal is tested without writing 100,000 files.
var maxFiles = MaxFiles

// Options say which tree to read.
type Options struct {
	// Exclude are gitignore-syntax patterns applied after the source's
	// .gitignore and .gpulayerignore.
	Exclude []string
	// MaxSize bounds the regular files' total size; 0 means
	// DefaultMaxSize.
	MaxSize int64
}

// File is one entry of a tree.
type File struct {
	Path string      // slash-separated, relative to the root
	Mode fs.FileMode // fs.ModeSymlink, or a regular file's permissions
	Size int64
	// Link is a symbolic link's target, as written in the link.
	Link string
	// Sum is the entry's hash: mode and content (a link's target).
	Sum string
}

// Tree is a code directory as read.
type Tree struct {
	Root  string
	Files []File // in path order
	Size  int64
	// Hash is the hex sha256 of every entry's path, mode and content.
	Hash string
}

// Manifest is path → short hash of each entry, what state keeps to count
// the files a later tree added, changed and removed.
func (t *Tree) Manifest() map[string]string {
	m := make(map[string]string, len(t.Files))
	for _, f := range t.Files {
		m[f.Path] = f.Sum[:16]
	}
	return m
}

// Diff counts the entries of new that old lacks, those both have with
// other hashes, and those only old has.
func Diff(old, new map[string]string) (added, changed, removed int) {
	for p, h := range new {
		switch o, ok := old[p]; {
		case !ok:
			added++
		case o != h:
			changed++
		}
	}
	for p := range old {
		if _, ok := new[p]; !ok {
			removed++
		}
	}
	return added, changed, removed
}

// Error is a tree that cannot be sent, naming the path at fault.
type Error struct {
	Path string // as the user wrote the source, joined with the entry
	Why  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Why }

// Read walks root and hashes every entry that the ignore rules keep. It
// refuses devices, FIFOs and sockets, links that point outside root, and
// trees over the size or file limits, naming the path.
func Read(root string, opts Options) (*Tree, error) {
	maxSize := opts.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &Error{Path: root, Why: "not a directory"}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	var rules Rules
	for _, name := range []string{".gitignore", ".gpulayerignore"} {
		if err := addIgnoreFile(&rules, filepath.Join(abs, name)); err != nil {
			return nil, &Error{Path: filepath.Join(root, name), Why: err.Error()}
		}
	}
	for _, p := range opts.Exclude {
		rules.AddPattern(p)
	}
	t := &Tree{Root: abs}
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == abs {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, abs+string(filepath.Separator)))
		shown := filepath.Join(root, filepath.FromSlash(rel))
		if d.IsDir() {
			if d.Name() == ".git" || rules.Ignored(rel, true) {
				return filepath.SkipDir
			}
			return nil
		}
		if rules.Ignored(rel, false) {
			return nil
		}
		if len(t.Files) >= maxFiles {
			return &Error{Path: shown, Why: fmt.Sprintf("the code holds more than %d files; exclude some (exclude, .gitignore, .gpulayerignore)", maxFiles)}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: rel}
		switch m := info.Mode(); {
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !inside(real, p, target) {
				return &Error{Path: shown, Why: fmt.Sprintf("a symbolic link that points outside the source (to %s); copy the file in, or exclude the link", target)}
			}
			f.Mode, f.Link = fs.ModeSymlink, target
			f.Sum = sum(f, strings.NewReader(target))
		case m.IsRegular():
			f.Mode, f.Size = m.Perm(), info.Size()
			t.Size += f.Size
			if t.Size > maxSize {
				return &Error{Path: shown, Why: fmt.Sprintf("the code is over max_size (%d bytes) with this file; exclude large files or raise max_size", maxSize)}
			}
			h, err := hashFile(p, f)
			if err != nil {
				return err
			}
			f.Sum = h
		default:
			return &Error{Path: shown, Why: "not a regular file, directory or symbolic link (" + kind(m) + "); it cannot be sent"}
		}
		t.Files = append(t.Files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
	h := sha256.New()
	for _, f := range t.Files {
		fmt.Fprintf(h, "%s\x00%s\n", f.Path, f.Sum)
	}
	t.Hash = hex.EncodeToString(h.Sum(nil))
	return t, nil
}

// inside says whether a link at path with target resolves within root
// (itself resolved): following it from the machine must not reach files
// the source does not hold.
func inside(root, path, target string) bool {
	if filepath.IsAbs(target) {
		return false
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return false
	}
	resolved := filepath.Join(dir, target)
	if r, err := filepath.EvalSymlinks(resolved); err == nil {
		resolved = r
	}
	rel, err := filepath.Rel(root, resolved)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

func sum(f File, content io.Reader) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", f.Mode)
	io.Copy(h, content)
	return hex.EncodeToString(h.Sum(nil))
}

func hashFile(p string, f File) (string, error) {
	r, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", f.Mode)
	n, err := io.Copy(h, io.LimitReader(r, f.Size+1))
	if err != nil {
		return "", err
	}
	if n != f.Size {
		return "", &Error{Path: p, Why: "changed while it was read"}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func addIgnoreFile(rs *Rules, p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Size() > ignoreFileMax {
		return fmt.Errorf("larger than %d bytes", ignoreFileMax)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return rs.Add(io.LimitReader(f, ignoreFileMax))
}
