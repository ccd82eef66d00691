package state

import (
	"context"
	"fmt"
)

// Copy writes the state of from into to, as its next version: moving a
// configuration's state from a local file to a bucket and back. It refuses
// to overwrite a state of another lineage (another configuration's), or a
// newer version of the same one, and holds both backends' locks (who
// records the command). It returns the state as written.
func Copy(ctx context.Context, from, to Backend, who LockInfo) (*State, error) {
	src, err := from.Lock(ctx, who, 0)
	if err != nil {
		return nil, err
	}
	defer src.Unlock()
	dst, err := to.Lock(ctx, who, 0)
	if err != nil {
		return nil, err
	}
	defer dst.Unlock()
	s, err := from.Load(ctx)
	if err != nil {
		return nil, err
	}
	if s.Lineage == "" {
		return nil, fmt.Errorf("%s holds no state yet: nothing to copy", from)
	}
	cur, err := to.Load(ctx)
	if err != nil {
		return nil, err
	}
	if cur.Lineage != "" && cur.Lineage != s.Lineage {
		return nil, fmt.Errorf("%s holds a state of another lineage (%s, not %s): another configuration's; not overwritten", to, cur.Lineage, s.Lineage)
	}
	if cur.Serial > s.Serial {
		return nil, fmt.Errorf("%s is newer (serial %d) than %s (serial %d); not overwritten", to, cur.Serial, from, s.Serial)
	}
	c := s.Clone()
	if err := to.Save(ctx, c, cur.Serial); err != nil {
		return nil, err
	}
	return c, nil
}
