package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

// maxErrorOutput bounds how much of a failed command's stderr an error
// quotes.
const maxErrorOutput = 512

// WriteFile writes content to path on t with the given permissions,
// through a session running POSIX sh (no SFTP subsystem needed). The file
// is written beside path under a temporary name and renamed, so a reader
// on the machine never sees half of it.
func (p *Pool) WriteFile(ctx context.Context, t Target, path string, mode fs.FileMode, content io.Reader) error {
	if path == "" {
		return hostError(t, fmt.Errorf("write file: no path"))
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := path + ".gpulayer-" + hex.EncodeToString(suffix[:])
	command := fmt.Sprintf("umask 077 && cat > %s && chmod %o %s && mv -f %s %s || { rm -f %s; exit 1; }",
		Quote(tmp), mode.Perm(), Quote(tmp), Quote(tmp), Quote(path), Quote(tmp))
	if content == nil {
		content = strings.NewReader("")
	}
	res, err := p.Run(ctx, t, command, content)
	if err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if res.ExitCode != 0 {
		return hostError(t, fmt.Errorf("write %s: exit status %d: %s", path, res.ExitCode, remoteMessage(res.Stderr)))
	}
	return nil
}

// remoteMessage is a command's stderr made fit for an error message: cut
// short, on one line, without the control bytes a hostile machine could
// send to a terminal.
func remoteMessage(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if len(s) > maxErrorOutput {
		s = s[:maxErrorOutput] + "..."
	}
	return iostreams.Sanitize(strings.Join(strings.Fields(s), " "), false)
}
