package codetree

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// WriteTar streams the tree as a gzip-compressed tar to w, file by file
// (never whole in memory). Each file is hashed again as it is sent: one
// that changed since Read makes WriteTar fail before the gzip stream is
// closed, so what the machine receives is cut short and its tar fails
// rather than unpacking a tree other than the one the plan hashed. Times
// are fixed so the stream depends only on the tree.
func (t *Tree) WriteTar(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0)
	for _, f := range t.Files {
		hdr := &tar.Header{Name: f.Path, ModTime: epoch, Format: tar.FormatPAX}
		if f.Mode == os.ModeSymlink {
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, int64(f.Mode.Perm()), f.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if err := copyChecked(tw, filepath.Join(t.Root, filepath.FromSlash(f.Path)), f); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func copyChecked(w io.Writer, p string, f File) error {
	r, err := os.Open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", f.Mode)
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, f.Size))
	if err != nil {
		return err
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.Sum {
		return &Error{Path: p, Why: "changed since the plan hashed the code; make a new plan"}
	}
	return nil
}
