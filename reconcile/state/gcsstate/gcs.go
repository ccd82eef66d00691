// Package gcsstate keeps gpulayer's state in a Google Cloud Storage bucket
// (docs/gitops.md), for pipelines whose runners share nothing but the
// bucket. Every write is a compare-and-swap on the object's generation
// (ifGenerationMatch): it succeeds only over the version it read, so two
// writers never silently replace each other's state, even when a lock was
// lost or broken. The lock is an object created only if none exists
// (ifGenerationMatch=0), holding its holder's record.
package gcsstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/gpulayer/gpulayer/reconcile/state"
)

// Object names under the prefix.
const (
	StateObject = "default.json"
	LockObject  = "default.lock"
)

// maxLockBytes bounds a lock object read back.
const maxLockBytes = 64 << 10

// Backend is state in a bucket. It implements state.Backend.
type Backend struct {
	client         *storage.Client
	bucket, prefix string
	// GpulayerVersion is written into every document saved.
	GpulayerVersion string
	// MaxBytes caps the state object read or written; 0 is
	// state.DefaultMaxBytes.
	MaxBytes int64

	mu sync.Mutex
	// read is the generation of the state object each serial was read
	// (or written) at: what a save of the next version must match.
	read map[uint64]int64
}

var _ state.Backend = (*Backend)(nil)

// Options say how to reach the bucket.
type Options struct {
	Bucket, Prefix string
	// Endpoint overrides the JSON API's endpoint ("http://127.0.0.1:PORT"
	// for a fake or an emulator); STORAGE_EMULATOR_HOST does the same.
	// Without either, Application Default Credentials authenticate.
	Endpoint string
	// HTTPClient, when set, carries the requests (tests).
	HTTPClient *http.Client
}

// New is the backend of the state under opts.Prefix in opts.Bucket.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Bucket == "" {
		return nil, errors.New("gcs backend: no bucket")
	}
	copts := []option.ClientOption{storage.WithJSONReads(), storage.WithDisabledClientMetrics()}
	if opts.Endpoint != "" {
		copts = append(copts, option.WithEndpoint(strings.TrimSuffix(opts.Endpoint, "/")+"/storage/v1/"), option.WithoutAuthentication())
	}
	if opts.HTTPClient != nil {
		copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
	}
	client, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("gcs backend gs://%s: %w", opts.Bucket, err)
	}
	return &Backend{client: client, bucket: opts.Bucket, prefix: strings.Trim(opts.Prefix, "/"), read: map[uint64]int64{}}, nil
}

// Close releases the client.
func (b *Backend) Close() error { return b.client.Close() }

func (b *Backend) name(object string) string {
	if b.prefix == "" {
		return object
	}
	return b.prefix + "/" + object
}

func (b *Backend) url(object string) string { return "gs://" + b.bucket + "/" + b.name(object) }

func (b *Backend) String() string { return "bucket object " + b.url(StateObject) }

func (b *Backend) maxBytes() int64 {
	if b.MaxBytes > 0 {
		return b.MaxBytes
	}
	return state.DefaultMaxBytes
}

// Load reads the state object; none yet is state.New() at generation 0.
func (b *Backend) Load(ctx context.Context) (*State, error) {
	s, gen, err := b.current(ctx)
	if err != nil {
		return nil, err
	}
	if s == nil {
		s = state.New()
	}
	b.mu.Lock()
	b.read[s.Serial] = gen
	b.mu.Unlock()
	return s, nil
}

// State is state.State, named here for the methods' signatures.
type State = state.State

// current reads the state object and its generation; nil and 0 when there
// is none.
func (b *Backend) current(ctx context.Context) (*State, int64, error) {
	obj := b.client.Bucket(b.bucket).Object(b.name(StateObject))
	r, err := obj.NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading state %s: %w", b.url(StateObject), err)
	}
	defer r.Close()
	if r.Attrs.Size > b.maxBytes() {
		return nil, 0, fmt.Errorf("state %s is %d bytes, more than the limit of %d", b.url(StateObject), r.Attrs.Size, b.maxBytes())
	}
	data, err := io.ReadAll(io.LimitReader(r, b.maxBytes()+1))
	if err != nil {
		return nil, 0, fmt.Errorf("reading state %s: %w", b.url(StateObject), err)
	}
	if int64(len(data)) > b.maxBytes() {
		return nil, 0, fmt.Errorf("state %s is more than the limit of %d bytes", b.url(StateObject), b.maxBytes())
	}
	s, err := state.Decode(b.url(StateObject), data)
	if err != nil {
		return nil, 0, err
	}
	return s, r.Attrs.Generation, nil
}

// Save writes s over the version of serial expected, on condition that
// the object is still at the generation that version was read at.
func (b *Backend) Save(ctx context.Context, s *State, expected uint64) error {
	b.mu.Lock()
	gen, ok := b.read[expected]
	b.mu.Unlock()
	if !ok {
		if expected != 0 {
			return fmt.Errorf("saving state %s: serial %d was not read through this backend; load it first", b.url(StateObject), expected)
		}
		gen = 0
	}
	next, data, err := state.Next(s, expected, b.GpulayerVersion)
	if err != nil {
		return fmt.Errorf("saving state %s: %w", b.url(StateObject), err)
	}
	if int64(len(data)) > b.maxBytes() {
		return fmt.Errorf("saving state %s: the document is %d bytes, more than the limit of %d", b.url(StateObject), len(data), b.maxBytes())
	}
	obj := b.client.Bucket(b.bucket).Object(b.name(StateObject))
	cond := storage.Conditions{GenerationMatch: gen}
	if gen == 0 {
		cond = storage.Conditions{DoesNotExist: true}
	}
	w := obj.If(cond).NewWriter(ctx)
	w.ContentType = "application/json"
	w.ChunkSize = 0 // one request: the precondition holds for the whole write
	_, werr := w.Write(data)
	cerr := w.Close()
	if err := errors.Join(werr, cerr); err != nil {
		if preconditionFailed(err) {
			return b.conflict(ctx, s, expected)
		}
		return fmt.Errorf("saving state %s: %w", b.url(StateObject), err)
	}
	b.mu.Lock()
	b.read[next.Serial] = w.Attrs().Generation
	b.mu.Unlock()
	state.Saved(s, next)
	return nil
}

// conflict says what the object holds now that a conditional write failed.
func (b *Backend) conflict(ctx context.Context, s *State, expected uint64) error {
	e := &state.ConflictError{Where: b.url(StateObject), ExpectedSerial: expected, ExpectedLineage: s.Lineage}
	if cur, _, err := b.current(ctx); err == nil && cur != nil {
		e.FoundSerial, e.FoundLineage = cur.Serial, cur.Lineage
	}
	return e
}

func preconditionFailed(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed
}

// Lock creates the lock object, which must not exist, waiting up to wait
// for it to be free.
func (b *Backend) Lock(ctx context.Context, who state.LockInfo, wait time.Duration) (state.Lock, error) {
	start := time.Now()
	data, err := json.Marshal(who)
	if err != nil {
		return nil, err
	}
	obj := b.client.Bucket(b.bucket).Object(b.name(LockObject))
	backoff := 100 * time.Millisecond
	for {
		w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		w.ContentType = "application/json"
		w.ChunkSize = 0
		_, werr := w.Write(data)
		cerr := w.Close()
		err := errors.Join(werr, cerr)
		if err == nil {
			return &lock{b: b, info: who, generation: w.Attrs().Generation}, nil
		}
		if !preconditionFailed(err) {
			return nil, fmt.Errorf("locking state %s: %w", b.url(StateObject), err)
		}
		waited := time.Since(start)
		if waited >= wait || ctx.Err() != nil {
			holder, _, _ := b.holder(ctx)
			locked := &state.LockedError{Where: b.url(StateObject), LockFile: b.url(LockObject), Holder: holder, Waited: waited}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w (%w)", locked, ctx.Err())
			}
			return nil, locked
		}
		t := time.NewTimer(min(backoff, wait-waited))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// holder reads the lock object: who holds it, and its generation.
func (b *Backend) holder(ctx context.Context) (state.LockInfo, int64, error) {
	r, err := b.client.Bucket(b.bucket).Object(b.name(LockObject)).NewReader(ctx)
	if err != nil {
		return state.LockInfo{}, 0, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxLockBytes))
	if err != nil {
		return state.LockInfo{}, 0, err
	}
	var info state.LockInfo
	if err := json.Unmarshal(bytes.TrimSpace(data), &info); err != nil {
		return state.LockInfo{}, r.Attrs.Generation, fmt.Errorf("lock %s: %w", b.url(LockObject), err)
	}
	return info, r.Attrs.Generation, nil
}

// ForceUnlock deletes the lock object, but only when its holder has id,
// and only the generation that was read (not a lock taken since).
func (b *Backend) ForceUnlock(ctx context.Context, id string) error {
	info, gen, err := b.holder(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("state %s is not locked", b.url(StateObject))
	}
	if err != nil {
		return err
	}
	if info.ID != id {
		return fmt.Errorf("state %s is locked by %q (lock ID %s), not by lock ID %s: nothing broken", b.url(StateObject), info.Command, info.ID, id)
	}
	err = b.client.Bucket(b.bucket).Object(b.name(LockObject)).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
	if preconditionFailed(err) {
		return fmt.Errorf("the lock of %s changed while it was being broken; look again", b.url(StateObject))
	}
	return err
}

// lock is a held lock object.
type lock struct {
	b          *Backend
	info       state.LockInfo
	generation int64
	once       sync.Once
	err        error
}

func (l *lock) Info() state.LockInfo { return l.info }

// Unlock deletes the lock object, only the generation this lock created:
// a lock broken and taken by someone else since is left to them.
func (l *lock) Unlock() error {
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := l.b.client.Bucket(l.b.bucket).Object(l.b.name(LockObject)).If(storage.Conditions{GenerationMatch: l.generation}).Delete(ctx)
		if err != nil && !preconditionFailed(err) && !errors.Is(err, storage.ErrObjectNotExist) {
			l.err = fmt.Errorf("unlocking state %s: %w", l.b.url(StateObject), err)
		}
	})
	return l.err
}
